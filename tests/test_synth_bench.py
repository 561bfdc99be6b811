"""``dualview bench-synth`` on a self-made gold set with scripted StubServer answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dualview.cli import app
from dualview.data.gold import GoldInstance, iter_gold_records, load_gold
from dualview.data.jsonl import iter_records
from dualview.data.schema import Record
from dualview.errors import ConfigError
from dualview.io.atomic import write_jsonl
from dualview.synth.bench import (
    BenchConfig,
    GoldFewShotReverse,
    SynthBench,
    closeness,
    gold_pairs,
    pick_examples,
    select_pairs,
)
from dualview.synth.reverse import ReverseTask
from dualview.synth.testing import StubReply, StubServer, prompt_of
from tests.gold_fixtures import instance
from tests.helpers import pin_parser_edit

DOMAINS = ("alpha", "beta", "gamma")
KEYS = [f"{d}-{n:03d}" for d in DOMAINS for n in (1, 2)]

# What the reversal LLM answers, per instance: zero-shot and with examples in the prompt.
ZERO_SHOT = {
    "alpha-001": "ok",
    "alpha-002": "none",
    "beta-001": "garbage",
    "beta-002": "same",
    "gamma-001": "garbage",
    "gamma-002": "ok",
}
FEW_SHOT = {**dict.fromkeys(KEYS, "ok"), "gamma-002": "none"}
# What the judge picks, per instance and instruction kind ('orig', 'gold', 'produced').
JUDGE_WRONG = {
    ("gamma-001", "orig"): "n_star",  # fails the gold pair, accepts the control
    ("beta-001", "gold"): "positive",  # fails the gold pair only
    ("gamma-002", "orig"): "unparsable",  # fails the gold pair, and the control
    ("beta-002", "produced"): "positive",
}


def gold_instances() -> list[GoldInstance]:
    found = []
    for key in KEYS:
        domain, number = key.split("-")
        data = instance(domain, int(number))
        data["instruction"] = f"Original rule for {key}: only children's material counts."
        data["reversed_instruction"] = f"Gold reversal for {key}: only adult material counts."
        if key == "alpha-002":  # N* is not the first instruction negative here
            data["instruction_negatives"][0].pop("n_star")
            data["instruction_negatives"][1]["n_star"] = True
        found.append(GoldInstance.model_validate(data))
    return found


@pytest.fixture
def gold_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "gold"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", iter_gold_records(gold_instances(), test_fraction=0.0))
    return folder


class Script:
    """Scripted reversal and judge answers, keyed by the instance the prompt is about."""

    def __init__(self) -> None:
        self.by_query = {i.query: i for i in gold_instances()}
        self.reverse_prompts: list[str] = []

    def __call__(self, request: dict) -> StubReply:
        prompt = prompt_of(request)
        if "<new_instruction>" in prompt:
            return self.reverse(prompt)
        return self.judge(prompt)

    def reverse(self, prompt: str) -> StubReply:
        self.reverse_prompts.append(prompt)
        turn = prompt.split("### Your turn", 1)[1]
        inst = self.by_query[re.search(r"Query: (.*)", turn).group(1).strip()]
        plan = (FEW_SHOT if "### Worked example" in prompt else ZERO_SHOT)[inst.instance]
        if plan == "ok":
            new = f"Produced rule for {inst.instance}: adult material only, please."
            return StubReply(f"<answer><new_instruction>{new}</new_instruction></answer>")
        if plan == "none":
            return StubReply("<answer>None</answer>")
        if plan == "same":
            return StubReply(
                f"<answer><new_instruction>{inst.instruction}</new_instruction></answer>"
            )
        return StubReply("I would rather talk about something else.")

    def judge(self, prompt: str) -> StubReply:
        inst = self.by_query[re.search(r"Query: (.*)", prompt).group(1).strip()]
        instruction = re.search(r"Instruction: (.*)", prompt).group(1).strip()
        kind = {inst.instruction: "orig", inst.reversed_instruction: "gold"}.get(
            instruction, "produced"
        )
        right = "positive" if kind == "orig" else "n_star"
        pick = JUDGE_WRONG.get((inst.instance, kind), right)
        if pick == "unparsable":
            return StubReply("Hard to say.")
        text = (inst.positive if pick == "positive" else inst.n_star).text
        passages = re.findall(r"^\[(\d+)\] (.*)$", prompt, re.MULTILINE)
        number = next(n for n, body in passages if body.strip() == text)
        return StubReply(f"<answer>[{number}]</answer>")


def bench_config(url: str, gold_dir: Path, **extra) -> BenchConfig:
    data = {
        "backend": {"kind": "openai", "model": "stub", "base_url": url, "max_retries": 0},
        "gold_dir": str(gold_dir),
        "shots": [0, 1],
        **extra,
    }
    return BenchConfig.model_validate(data)


def bench_cli_args(url: str, gold_dir: Path, out: Path, *extra: str) -> list[str]:
    """``dualview bench-synth`` against the stub server at ``url`` on ``gold_dir``."""
    common = ["--backend", "openai", "--model", "stub", "--base-url", url]
    return ["bench-synth", *common, "--gold-dir", str(gold_dir), *extra, "--out", str(out)]


def test_counts_and_judge_agreement_match_the_script(tmp_path: Path, gold_dir: Path) -> None:
    script = Script()
    with StubServer(script) as server:
        report = SynthBench(bench_config(server.base_url, gold_dir), tmp_path / "out").run()

    zero, one = report["shots"]["0"], report["shots"]["1"]
    assert zero["outcomes"] == {"ok": 2, "impossible": 1, "rejected": 3, "skipped": 0, "error": 0}
    assert zero["rejection_reasons"] == {"no_answer": 2, "same_as_original": 1}
    assert zero["parse_rate"] == pytest.approx(4 / 6, abs=1e-4)
    assert zero["none_rate"] == pytest.approx(1 / 6, abs=1e-4)
    # Zero-shot accepted alpha-001 (passes) and gamma-002 (its original scenario is unparsable).
    assert zero["judge"]["passed"] == 1
    assert one["outcomes"] == {"ok": 5, "impossible": 1, "rejected": 0, "skipped": 0, "error": 0}
    assert one["parse_rate"] == 1.0 and one["rejection_reasons"] == {}
    # Few-shot: gamma-001 fails under its original instruction, beta-002's reversal misleads.
    assert one["judge"]["passed"] == 3
    assert one["judge"]["pass_rate_of_accepted"] == pytest.approx(3 / 5, abs=1e-4)

    positive, negative = report["judge"]["gold_positive"], report["judge"]["gold_negative"]
    assert (positive["units"], positive["passed"], positive["accuracy"]) == (6, 3, 0.5)
    assert positive["unparsable_judgements"] == 1
    assert positive["failed_unit_answers"]["Hard to say."] == 1
    # Controls: gamma-001 accepted (wrong), gamma-002 unparsable (wrong), four rejected.
    assert (negative["units"], negative["passed"]) == (6, 1)
    assert negative["accuracy"] == pytest.approx(4 / 6, abs=1e-4)
    assert report["judge"]["balanced_accuracy"] == pytest.approx((0.5 + 4 / 6) / 2, abs=1e-4)
    assert "| 0 | 6 | 67% | 17% | 33% | 0/2 |" in (tmp_path / "out" / "bench.md").read_text()
    # The reversal targets the gold N* (meta.n_star), even where it is not the first negative.
    produced = list(iter_records(tmp_path / "out" / "shots-1" / "reverse.jsonl"))
    gold = {o.id: dv.positives[0].id for o, dv in gold_pairs(load_gold("train", gold_dir))}
    assert len(produced) == 5
    assert all(r.positives[0].id == gold[r.parent_id] for r in produced)


def test_few_shot_examples_never_show_the_instance_being_reversed(
    tmp_path: Path, gold_dir: Path
) -> None:
    pool = gold_pairs(load_gold("train", gold_dir))
    task = GoldFewShotReverse(pool, 3, bench_config("http://unused", gold_dir))
    for orig, _ in pool:
        shown = task.examples_for(orig)
        assert len(shown) == 3
        assert all(ex.id != orig.id for ex, _ in shown)
        assert all(ex.meta["domain"] != orig.meta["domain"] for ex, _ in shown)
    # And in the prompts actually sent: no worked example carries the query of the turn.
    script = Script()
    with StubServer(script) as server:
        SynthBench(bench_config(server.base_url, gold_dir, shots=[2]), tmp_path / "o").run()
    assert len(script.reverse_prompts) == 6
    for prompt in script.reverse_prompts:
        examples, turn = prompt.split("### Your turn", 1)
        query = re.search(r"Query: (.*)", turn).group(1)
        assert examples.count("### Worked example") == 2
        assert query not in examples


def test_example_choice_is_deterministic_and_spreads_domains(gold_dir: Path) -> None:
    pool = gold_pairs(load_gold("train", gold_dir))
    first = [o.id for o, _ in pick_examples(pool, "alpha", 2, seed=7)]
    assert first == [o.id for o, _ in pick_examples(pool, "alpha", 2, seed=7)]
    assert {i.split("-")[1] for i in first} == {"beta", "gamma"}


def test_closeness_counts_near_copies_of_the_original() -> None:
    def produced(instruction: str) -> Record:
        data = instance("alpha", 1)
        doc = {"id": "d1", "text": "some passage text"}
        return Record.model_validate(
            {
                "id": "x-dv",
                "parent_id": "x",
                "view": "dv",
                "query": data["query"],
                "instruction": instruction,
                "positives": [doc],
                "meta": {"orig_instruction": "I want material for children only."},
            }
        )

    found = closeness(
        [produced("I want material for children only, please."), produced("Adults only here.")],
        {"x": "Adults only here."},
        near_copy=0.8,
    )
    assert found["accepted"] == 2 and found["near_copies_of_original"] == 1
    assert 0.5 < found["mean_ratio_to_gold"] < 1.0


def test_selection_is_round_robin_over_domains(gold_dir: Path) -> None:
    pool = gold_pairs(load_gold("train", gold_dir))
    chosen = [o.meta["instance"] for o, _ in select_pairs(pool, 4)]
    assert chosen == ["alpha-001", "beta-001", "gamma-001", "alpha-002"]


def test_rerun_resumes_from_the_caches(tmp_path: Path, gold_dir: Path) -> None:
    script = Script()
    with StubServer(script) as server:
        config = bench_config(server.base_url, gold_dir)
        first = SynthBench(config, tmp_path / "out").run()
        asked = server.requests
        second = SynthBench(config, tmp_path / "out").run()
        assert server.requests == asked
    for report in (first, second):
        for shots in report["shots"].values():
            shots.pop("wall_s_this_run")
            shots["judge"].pop("wall_s_this_run")
        for side in ("gold_positive", "gold_negative"):
            report["judge"][side].pop("wall_s_this_run")
    assert first == second


def test_a_parser_change_rejudges_the_benchmark_from_its_caches(
    tmp_path: Path, gold_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with StubServer(Script()) as server:
        config = bench_config(server.base_url, gold_dir)
        first = SynthBench(config, tmp_path / "out").run()
        asked = server.requests
        pin_parser_edit(monkeypatch, ReverseTask)
        second = SynthBench(config, tmp_path / "out").run()
        assert server.requests == asked  # reversals replayed, judgements cached
    for shots, metrics in second["shots"].items():
        assert metrics["outcomes"] == first["shots"][shots]["outcomes"]
    stats = json.loads((tmp_path / "out/shots-1/reverse.jsonl.stats.json").read_text())
    assert stats["counts"]["replayed_answers"] == stats["units"]


def test_cli_writes_json_and_table(tmp_path: Path, gold_dir: Path) -> None:
    with StubServer(Script()) as server:
        args = bench_cli_args(server.base_url, gold_dir, tmp_path / "cli", "--limit", "3")
        result = CliRunner().invoke(app, [*args, "--shots", "0,1"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "cli" / "bench.json").read_text())
    assert report["instances"] == 3 and set(report["shots"]) == {"0", "1"}
    assert "| 1 | 3 |" in result.output


def test_cli_bad_shots_is_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench-synth", "--shots", "0,x", "--out", str(tmp_path)])
    assert result.exit_code != 0
    assert "--shots" in str(result.exception or result.output)


def test_writer_only_run_asks_no_judge_and_says_not_judged(tmp_path: Path, gold_dir: Path) -> None:
    script = Script()
    with StubServer(script) as server:
        config = bench_config(server.base_url, gold_dir, judge=False)
        report = SynthBench(config, tmp_path / "out").run()
        # Only reversal prompts went out: one per instance and shots setting.
        assert server.requests == len(script.reverse_prompts) == 2 * len(KEYS)
    assert report["judged"] is False
    assert report["judge"] is None and report["judge_backend"] is None
    zero, one = report["shots"]["0"], report["shots"]["1"]
    # The writer's numbers are those of the judged run (same script).
    assert zero["outcomes"] == {"ok": 2, "impossible": 1, "rejected": 3, "skipped": 0, "error": 0}
    assert one["outcomes"]["ok"] == 5 and one["judge"] is None
    assert one["closeness"]["accepted"] == 5 and len(one["samples"]) == 5
    assert one["complete"] is True
    assert not (tmp_path / "out" / "judge").exists()
    assert not (tmp_path / "out" / "shots-1" / "verify.jsonl").exists()
    table = (tmp_path / "out" / "bench.md").read_text()
    assert "no judge (not judged)" in table and "Not judged: writer-only run" in table
    assert "| 0 | 6 | 67% | 17% | 33% | 0/2 | no_answer 2, same_as_original 1 | not judged |" in (
        table
    )
    assert "judge scoring" not in table and "balanced" not in table


def test_writer_only_reversals_and_caches_match_the_judged_run(
    tmp_path: Path, gold_dir: Path
) -> None:
    """The judge changes nothing the writer does: a judged run on the writer-only run's folder
    reuses its reversals (no new reversal prompt) and asks only the judge."""
    script = Script()
    with StubServer(script) as server:
        SynthBench(bench_config(server.base_url, gold_dir, judge=False), tmp_path / "out").run()
        writer_only = (tmp_path / "out" / "shots-1" / "reverse.jsonl").read_text()
        asked = len(script.reverse_prompts)
        judged = SynthBench(bench_config(server.base_url, gold_dir), tmp_path / "out").run()
        assert len(script.reverse_prompts) == asked
    assert (tmp_path / "out" / "shots-1" / "reverse.jsonl").read_text() == writer_only
    assert judged["judged"] is True and judged["shots"]["1"]["judge"]["passed"] == 3
    assert "judge scoring" in (tmp_path / "out" / "bench.md").read_text()


@pytest.mark.parametrize("extra", [{"judge_only": True}, {"samples": 3}])
def test_writer_only_refuses_settings_that_need_the_judge(
    tmp_path: Path, gold_dir: Path, extra: dict
) -> None:
    config = bench_config("http://unused", gold_dir, judge=False, **extra)
    with pytest.raises(ConfigError, match="judge: false"):
        SynthBench(config, tmp_path / "out")


def test_cli_no_judge_flag(tmp_path: Path, gold_dir: Path) -> None:
    script = Script()
    with StubServer(script) as server:
        extra = ["--limit", "2", "--shots", "1", "--no-judge"]
        args = bench_cli_args(server.base_url, gold_dir, tmp_path / "cli", *extra)
        result = CliRunner().invoke(app, args)
        assert server.requests == 2
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "cli" / "bench.json").read_text())
    assert report["config"]["judge"] is False and report["judge"] is None
    assert "not judged" in result.output
