"""Getting the most out of a small model (issue 36 item 2): constrained output, the pointwise
judge (a yes/no per passage, both orders), its gold check with a Wilson interval, and
self-consistency of sampled reversals in ``bench-synth``; all with scripted StubServer answers."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dualview.cli import app
from dualview.data.gold import iter_gold_records
from dualview.data.jsonl import iter_records
from dualview.io.atomic import write_jsonl
from dualview.proportions import wilson_interval
from dualview.synth.backends.base import BackendError, SamplingParams
from dualview.synth.backends.local_engines import LlamaCppEngine, TransformersEngine
from dualview.synth.bench import SynthBench
from dualview.synth.reverse import REVERSE_REGEX, ReverseConfig, ReverseTask
from dualview.synth.testing import StubReply, StubServer, prompt_of
from dualview.synth.verify import (
    YES_NO_REGEX,
    VerifyConfig,
    VerifyTask,
    choice_regex,
    parse_yes_no,
)
from tests.test_synth_bench import bench_cli_args, bench_config, gold_instances

# Pointwise judge mistakes, per instance: "n_star_yes" says yes to N* under the original
# instruction (the control fails); "order" answers yes under the original instruction only
# when the passage comes first (a position bias, which must not make a yes).
JUDGE_WRONG = {"beta-001": "n_star_yes", "gamma-001": "order"}


@pytest.fixture
def gold_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "gold"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", iter_gold_records(gold_instances(), test_fraction=0.0))
    return folder


class PointwiseScript:
    """A pointwise judge (yes when the passage fits the instruction, with `JUDGE_WRONG`) and
    a writer whose reversal depends on the sampling seed (self-consistency)."""

    def __init__(self) -> None:
        self.by_query = {i.query: i for i in gold_instances()}
        self.regexes: dict[str, set[str | None]] = {"reverse": set(), "judge": set()}
        self.judge_prompts: list[str] = []

    def __call__(self, request: dict) -> StubReply:
        prompt = prompt_of(request)
        kind = "reverse" if "<new_instruction>" in prompt else "judge"
        self.regexes[kind].add(request.get("guided_regex"))
        return self.reverse(prompt, request) if kind == "reverse" else self.judge(prompt)

    def reverse(self, prompt: str, request: dict) -> StubReply:
        turn = prompt.split("### Your turn", 1)[1]
        inst = self.by_query[re.search(r"Query: (.*)", turn).group(1).strip()]
        if request["temperature"] == 0:  # greedy: a copy of the original, rejected
            new = inst.instruction
        else:  # seed 1: a reversal the judge rejects; seed 2: one it accepts
            new = f"Sample {request['seed']} for {inst.instance}: adult material only."
        return StubReply(f"<answer><new_instruction>{new}</new_instruction></answer>")

    def judge(self, prompt: str) -> StubReply:
        self.judge_prompts.append(prompt)
        inst = self.by_query[re.search(r"Query: (.*)", prompt).group(1).strip()]
        instruction = re.search(r"Instruction: (.*)", prompt).group(1).strip()
        passage = re.search(r"Passage: (.*)", prompt).group(1).strip()
        passage_first = prompt.index("Passage:") < prompt.index("Query:")
        is_n_star, is_positive = passage == inst.n_star.text, passage == inst.positive.text
        if instruction == inst.instruction:
            yes = is_positive
            if JUDGE_WRONG.get(inst.instance) == "n_star_yes":
                yes = yes or is_n_star
            if JUDGE_WRONG.get(inst.instance) == "order":
                yes = passage_first
        else:
            yes = is_n_star and not instruction.startswith("Sample 1 ")
        return StubReply(f"<answer>{'yes' if yes else 'no'}</answer>")


def pointwise_config(url: str, gold_dir: Path, **extra: object):
    verify = {"scoring": "pointwise", "constrained": True, "distractors": 0}
    return bench_config(url, gold_dir, shots=[1], verify=verify, **extra)


def test_pointwise_judge_check_with_wilson_interval(tmp_path: Path, gold_dir: Path) -> None:
    script = PointwiseScript()
    with StubServer(script) as server:
        report = SynthBench(pointwise_config(server.base_url, gold_dir), tmp_path / "o").run()
    judge = report["judge"]
    checks = {k: (c["correct"], c["n"]) for k, c in judge["by_check"].items()}
    assert checks == {
        "gold_reversal_yes": (6, 6),
        "original_as_reversal_no": (5, 6),  # beta-001 says yes to N* under the original
        "original_yes": (5, 6),  # gamma-001's yes depends on the order: not a yes
        "positive_under_reversal_no": (6, 6),
    }
    assert judge["balanced_accuracy"] == pytest.approx(22 / 24, abs=1e-4)
    assert judge["balanced_ci95"] == [round(x, 4) for x in wilson_interval(22, 24)]
    assert (judge["gold_units_passed"]["correct"], judge["gold_units_passed"]["n"]) == (4, 6)
    assert judge["gold_positive"]["unparsable_judgements"] == 0
    # 22/24 = 0.92, but the interval's lower end (0.74) is below 0.75: not shown, not trusted.
    assert judge["trusted"] is False
    # Each key passage alone, in both orders: 2 scenarios x 2 passages x 2 orders per pair,
    # and no control run (its prompts are a subset of these).
    key_prompts = [p for p in script.judge_prompts if "Sample" not in p]
    gold_side = [p for p in key_prompts if "Gold reversal" in p or "Original rule" in p]
    assert len(set(gold_side)) == 6 * 8
    assert not (tmp_path / "o" / "judge" / "control.jsonl").exists()
    table = (tmp_path / "o" / "bench.md").read_text()
    assert "| balanced (all four) | 24 | 92% [74, 98] |" in table


def test_constrained_output_reaches_the_engine_and_keys_change_only_when_set(
    tmp_path: Path, gold_dir: Path
) -> None:
    script = PointwiseScript()
    with StubServer(script) as server:
        config = pointwise_config(
            server.base_url, gold_dir, reverse={"constrained": True}, samples=1
        )
        SynthBench(config, tmp_path / "o").run()
    assert script.regexes == {"reverse": {REVERSE_REGEX}, "judge": {YES_NO_REGEX}}
    # Defaults: the options stay out of the cache key (earlier caches stay valid) ...
    assert set(VerifyTask().fingerprint()["config"]) == {
        "distractors", "distractor_file", "seed", "template", "max_passage_chars",
    }  # fmt: skip
    assert "constrained" not in ReverseTask().fingerprint()["config"]
    assert "regex" not in SamplingParams().model_copy(update={"regex": "x"}).model_dump()
    with pytest.raises(ValueError, match="constrained"):  # a config cannot slip it past the key
        SamplingParams.model_validate({"regex": "x"})
    # ... and enter it when set.
    pointwise = VerifyTask(VerifyConfig(scoring="pointwise")).fingerprint()
    assert pointwise["config"]["scoring"] == "pointwise"
    assert ReverseTask(ReverseConfig(constrained=True)).fingerprint()["config"]["constrained"]
    assert VerifyTask(VerifyConfig(constrained=True)).fingerprint() != VerifyTask().fingerprint()


def test_constrained_formats_match_what_the_parsers_accept() -> None:
    assert re.fullmatch(choice_regex(4), "<answer>[4]</answer>")
    assert not re.fullmatch(choice_regex(4), "<answer>[5]</answer>")
    assert re.fullmatch(REVERSE_REGEX, "<answer>None</answer>")
    assert re.fullmatch(
        REVERSE_REGEX, "<answer><new_instruction>Adults.</new_instruction></answer>"
    )
    assert parse_yes_no("<answer>yes</answer>").value is True
    assert parse_yes_no(" No. ").value is False
    assert parse_yes_no("<answer>maybe</answer>").status == "rejected"
    assert parse_yes_no("Hard to say.").status == "rejected"


def test_engines_without_constrained_decoding_refuse_a_regex() -> None:
    params = SamplingParams().model_copy(update={"regex": YES_NO_REGEX})
    for engine in (LlamaCppEngine, TransformersEngine):
        with pytest.raises(BackendError, match="cannot constrain"):
            engine.__new__(engine).generate([{"role": "user", "content": "x"}], params)


def test_openvino_engine_turns_a_regex_into_structured_output() -> None:
    openvino_genai = pytest.importorskip("openvino_genai")
    from dualview.synth.backends.openvino_engine import OpenVINOEngine

    engine = OpenVINOEngine.__new__(OpenVINOEngine)
    engine._ov = openvino_genai
    constrained = engine._config(SamplingParams().model_copy(update={"regex": YES_NO_REGEX}), 8)
    assert constrained.structured_output_config.regex == YES_NO_REGEX
    assert engine._config(SamplingParams(), 8).structured_output_config is None


def test_pointwise_verdicts_do_not_depend_on_the_candidates_order(gold_dir: Path) -> None:
    """The choice judge's prompt changes with the shuffle seed; the pointwise judge asks the
    same per-passage prompts whatever the order, so its verdicts cannot follow a position."""
    records = list(iter_records(gold_dir / "train.jsonl"))
    pair = [records[0], next(r for r in records if r.parent_id == records[0].id)]
    script = PointwiseScript()

    class Recorder:
        def __init__(self) -> None:
            self.prompts: list[str] = []

        async def ask(self, prompt: str, regex: str | None = None) -> str:
            self.prompts.append(prompt)
            if "Passage:" not in prompt:  # the choice judge, biased to the first position
                return "<answer>[1]</answer>"
            return script.judge(prompt).text

    def prompts(scoring: str, seed: int) -> tuple[list[str], str]:
        llm = Recorder()
        task = VerifyTask(VerifyConfig(scoring=scoring, seed=seed, distractors=0))
        outcome = asyncio.run(task.run(pair, llm))  # type: ignore[arg-type]
        return sorted(llm.prompts), outcome.status

    choice = {tuple(prompts("choice", seed)[0]) for seed in range(4)}
    assert len(choice) > 1
    pointwise = [prompts("pointwise", seed) for seed in range(4)]
    assert all(p == pointwise[0] for p in pointwise)
    assert pointwise[0][1] == "ok"


def test_self_consistency_keeps_the_first_verified_candidate(
    tmp_path: Path, gold_dir: Path
) -> None:
    script = PointwiseScript()
    with StubServer(script) as server:
        config = pointwise_config(server.base_url, gold_dir, samples=3)
        report = SynthBench(config, tmp_path / "o").run()
    greedy = report["shots"]["1"]
    assert greedy["outcomes"]["ok"] == 0  # greedy copies the original: rejected
    sc = greedy["self_consistency"]
    # Seed 2's reversals pass, except where the judge errs under the original instruction
    # (beta-001, gamma-001: see JUDGE_WRONG).
    assert (sc["k"], sc["accepted_by_writer"], sc["verified"]) == (3, [0, 6, 6], [0, 0, 4])
    assert sc["instances_verified"] == 4 and sc["verified_rate"] == pytest.approx(4 / 6, abs=1e-4)
    kept = list(iter_records(tmp_path / "o" / "shots-1" / "kept.jsonl"))
    assert [r.instruction.split(" for ")[0] for r in kept] == ["Sample 2"] * 4
    assert {r.parent_id for r in kept}.isdisjoint({"gold-beta-001-orig", "gold-gamma-001-orig"})
    assert sc["seconds_per_record"] is not None
    saved = json.loads((tmp_path / "o" / "bench.json").read_text())
    assert saved["shots"]["1"]["self_consistency"]["instances_verified"] == 4
    assert "| 1 | 3 | 0, 6, 6 | 0, 0, 4 | 4 (67%) |" in (tmp_path / "o" / "bench.md").read_text()


def test_cli_judge_only_with_the_new_options(tmp_path: Path, gold_dir: Path) -> None:
    script = PointwiseScript()
    with StubServer(script) as server:
        extra = [
            "--limit", "3",
            "--set", "judge_only=true",
            "--set", "verify.scoring=pointwise",
            "--set", "verify.constrained=true",
            "--set", "verify.distractors=0",
        ]  # fmt: skip
        args = bench_cli_args(server.base_url, gold_dir, tmp_path / "cli", *extra)
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "cli" / "bench.json").read_text())
    assert report["shots"] == {} and report["judge"]["scoring"] == "pointwise"
    assert script.regexes == {"reverse": set(), "judge": {YES_NO_REGEX}}
    assert "| balanced (all four) | 12 |" in result.output
    assert report["judge"]["trusted"] is (report["judge"]["balanced_ci95"][0] >= 0.75)
