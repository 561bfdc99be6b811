"""Runner features: shards and their merge, rate limits, the tasks seed/poison/verify end to
end against the stub, the vLLM offline backend's batching (with a stand-in module), CLI errors."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path

import pytest

from dualview.data.jsonl import iter_records
from dualview.data.schema import Document, Record
from dualview.errors import DualviewError
from dualview.io.atomic import write_jsonl
from dualview.synth.backends.base import BackendConfig, BackendError, Completion, SamplingParams
from dualview.synth.backends.openai_http import OpenAIBackend, backoff_delay, parse_retry_after
from dualview.synth.job_stats import JobStats, stats_markdown
from dualview.synth.jobs import TASKS
from dualview.synth.limits import Limits
from dualview.synth.merge import merge_shards
from dualview.synth.reverse import ReverseConfig, ReverseTask, choose_n_star
from dualview.synth.runner import Runner, RunnerConfig, Shard, reason_code
from dualview.synth.task import Outcome
from dualview.synth.testing import StubReply, StubServer, prompt_of
from dualview.synth.verify import VerifyTask
from tests.helpers import pin_parser_edit

FIXTURE = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"


def run_task(task, url: str, source: Path, out: Path, **runner) -> JobStats:
    backend = OpenAIBackend(BackendConfig(kind="openai", model="stub", base_url=url))
    config = RunnerConfig(**{"concurrency": 8, **runner})
    return Runner(task, backend, SamplingParams(), config).run(
        lambda: task.units(iter_records(source)), out
    )


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_shards_merge_to_the_unsharded_output(tmp_path: Path) -> None:
    with StubServer() as server:
        whole = run_task(ReverseTask(), server.base_url, FIXTURE, tmp_path / "whole.jsonl")
        parts = [tmp_path / f"part{i}.jsonl" for i in range(3)]
        for i, part in enumerate(parts):
            run_task(ReverseTask(), server.base_url, FIXTURE, part, shard=f"{i}/3")
    assert whole.outcomes.ok == 20
    assert [r["parent_id"] for r in lines(tmp_path / "whole.jsonl")] == [
        r.id for r in iter_records(FIXTURE)
    ]
    with pytest.raises(DualviewError, match=r"missing \[1\]"):
        merge_shards(tmp_path / "m.jsonl", [parts[0], parts[2]])
    stats = merge_shards(tmp_path / "merged.jsonl", [parts[2], parts[0], parts[1]])
    assert (tmp_path / "merged.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert stats.records_out == 20 and stats.outcomes.ok == 20

    # A truncated shard output or an incomplete shard is refused.
    parts[1].write_text("".join(parts[1].read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(DualviewError, match="its stats say"):
        merge_shards(tmp_path / "m.jsonl", parts)
    stats_file = parts[0].with_name(parts[0].name + ".stats.json")
    broken = {**json.loads(stats_file.read_text()), "complete": False}
    stats_file.write_text(json.dumps(broken))
    with pytest.raises(DualviewError, match="incomplete"):
        merge_shards(tmp_path / "m.jsonl", parts)


def test_shard_spec_is_checked() -> None:
    assert Shard.parse("1/4").bounds(10) == (2, 5)
    assert [Shard(i, 3).bounds(7) for i in range(3)] == [(0, 2), (2, 4), (4, 7)]
    for bad in ("4/4", "x/2", "1", "-1/2"):
        with pytest.raises(DualviewError):
            Shard.parse(bad)


def test_seed_and_poison_write_valid_records(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    write_jsonl(
        plain,
        [
            Record(id=r.id, view="plain", query=r.query, positives=r.positives)
            for r in iter_records(FIXTURE)
        ],
    )
    seed_cls, poison_cls = TASKS.get("seed").build, TASKS.get("poison").build
    with StubServer() as server:
        seeded = run_task(seed_cls(), server.base_url, plain, tmp_path / "seeded.jsonl")
        poisoned = run_task(poison_cls(), server.base_url, FIXTURE, tmp_path / "poisoned.jsonl")
    assert seeded.outcomes.ok == 20 and poisoned.outcomes.ok == 20
    seeded_records = list(iter_records(tmp_path / "seeded.jsonl"))
    assert all(r.view == "orig" and len(r.instruction_negatives) == 2 for r in seeded_records)
    poisoned_records = list(iter_records(tmp_path / "poisoned.jsonl"))
    assert len(poisoned_records) == 60
    roles = [r.meta["infir_role"] for r in poisoned_records[:3]]
    assert roles == ["positive", "instruction_negative", "query_negative"]
    first = poisoned_records[0]
    assert first.positives[0].id == "demo-00-pos" and poisoned_records[1].parent_id == first.id


def keyword_judge(request: dict) -> StubReply:
    """Picks the passage containing the instruction's last word; unparsable if none does."""
    prompt = prompt_of(request)
    word = re.search(r"Instruction: .* (\w+)\.?\n", prompt).group(1)
    numbers = re.findall(rf"\[(\d+)\] [^\n]*\b{word}\b", prompt)
    return StubReply(f"<answer>[{numbers[0]}]</answer>" if numbers else "<answer>maybe</answer>")


def fruit_record(i: int, dv_word: str) -> Record:
    docs = [
        Document(id=f"a{i}", text="A passage about apples."),
        Document(id=f"p{i}", text="A passage about pears."),
    ]
    return Record(
        id=f"f{i}-dv",
        parent_id=f"f{i}",
        view="dv",
        query="fruit",
        instruction=f"I want {dv_word}.",
        positives=[docs[1]],
        instruction_negatives=[docs[0]],
        hard_negatives=[Document(id=f"h{i}-{j}", text=f"Filler text {j}.") for j in range(4)],
        meta={"orig_instruction": "I want apples.", "orig_positive_id": f"a{i}"},
    )


def test_verify_keeps_only_units_whose_intended_passages_win(tmp_path: Path) -> None:
    words = ["pears"] * 5 + ["apples"] * 3 + ["plums"] * 2  # good, no swap, unanswerable
    source = tmp_path / "dv.jsonl"
    write_jsonl(source, [fruit_record(i, w) for i, w in enumerate(words)])
    with StubServer(keyword_judge) as server:
        stats = run_task(VerifyTask(), server.base_url, source, tmp_path / "kept.jsonl")
    assert stats.outcomes.ok == 5 and stats.outcomes.rejected == 5
    assert stats.summary["swap_accuracy"] == 0.5
    assert stats.summary["scenario_accuracy"] == {"dv": 0.5, "orig": 1.0}
    assert stats.llm_calls == 20
    dropped = lines(tmp_path / "kept.jsonl.dropped.jsonl")
    assert sum("judge picked a" in d["reason"] for d in dropped) == 3
    assert sum("unparsable" in d["reason"] for d in dropped) == 2
    # the stats count the rejections by reason code, as the dropped file lists them
    codes = Counter(reason_code(d["reason"]) for d in dropped if d["status"] == "rejected")
    assert stats.rejections == dict(codes) and sum(codes.values()) == 5
    table = stats_markdown(stats)
    assert "| rejected by the judge (or its answer unparsable) | 5 |" in table
    assert "| records out | 5 |" in table
    assert all(f"{code} {n}" in table for code, n in codes.items())
    assert [r["id"] for r in lines(tmp_path / "kept.jsonl")] == [f"f{i}-dv" for i in range(5)]


def test_random_n_star_is_seeded_per_record() -> None:
    record = next(iter_records(FIXTURE))
    picks = {choose_n_star(record, "random", seed) for seed in range(20)}
    assert picks == {0, 1}
    assert choose_n_star(record, "random", 3) == choose_n_star(record, "random", 3)
    assert choose_n_star(record, "first", 3) == 0
    a, b = ReverseTask(ReverseConfig(n_star="random")), ReverseTask()
    assert a.fingerprint() != b.fingerprint()


class CountingBackend:
    identity = "fake"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages, params) -> Completion:
        self.calls += 1
        return Completion("<answer>None</answer>", tokens_in=10, tokens_out=5)

    async def aclose(self) -> None:
        pass


def test_requests_per_minute_limit_paces_calls(tmp_path: Path) -> None:
    records = [
        r.model_copy(update={"id": f"{r.id}-{k}"}) for k in range(2) for r in iter_records(FIXTURE)
    ]
    source = tmp_path / "in.jsonl"
    write_jsonl(source, records)
    task = ReverseTask()
    config = RunnerConfig(concurrency=40, requests_per_minute=1200)  # 20/s, 1 s burst
    started = time.monotonic()
    stats = Runner(task, CountingBackend(), SamplingParams(), config).run(
        lambda: task.units(iter_records(source)), tmp_path / "o.jsonl"
    )
    elapsed = time.monotonic() - started
    assert stats.outcomes.impossible == 40
    assert elapsed >= 0.9  # 40 calls at 20/s with 20 allowed at once


class FakeClock:
    """``time.monotonic`` and ``asyncio.sleep`` for `dualview.synth.limits`: sleeping advances
    the clock by exactly the delay asked, so waits are counted, not timed."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay
        await asyncio.sleep(0)


def test_token_limit_books_estimates_and_corrects(monkeypatch: pytest.MonkeyPatch) -> None:
    from dualview.synth import limits as limits_module

    clock = FakeClock()
    monkeypatch.setattr(limits_module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(
        limits_module, "asyncio", types.SimpleNamespace(Lock=asyncio.Lock, sleep=clock.sleep)
    )

    async def scenario() -> None:
        limits = Limits(tokens_per_minute=6000)  # 100 tokens/s
        booked = await limits.before_call("x" * 400, max_tokens=100)  # 100 + 100 = 200 booked
        assert booked == 200
        limits.after_call(booked, used=50)  # gives 150 back: next slot at 0.5 s
        await limits.before_call("x" * 400, max_tokens=100)  # waits 0.5 s; next at 2.5 s
        await limits.before_call("x" * 400, max_tokens=100)  # waits 2.0 s

    asyncio.run(scenario())
    assert clock.sleeps == pytest.approx([0.5, 2.0])
    assert clock.now - 1000.0 == pytest.approx(2.5)


def test_backoff_and_retry_after_helpers() -> None:
    import random

    rng = random.Random(0)
    delays = [backoff_delay(n, 1.0, 8.0, rng) for n in range(6)]
    assert all(0.5 * min(8, 2**n) <= d <= min(8, 2**n) for n, d in enumerate(delays))
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    batches: list[int] = []

    class LLM:
        def __init__(self, model: str, max_model_len: int) -> None:
            self.model = model

        def chat(self, conversations, sampling):
            batches.append(len(conversations))
            out = types.SimpleNamespace
            return [
                out(
                    prompt_token_ids=[1, 2],
                    outputs=[out(text=c[-1]["content"][::-1], token_ids=[1])],
                )
                for c in conversations
            ]

    module = types.SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: kw)
    monkeypatch.setitem(sys.modules, "vllm", module)
    return batches


def test_vllm_offline_batches_concurrent_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    from dualview.synth.backends.vllm_offline import VLLMOfflineBackend

    batches = fake_vllm(monkeypatch)

    async def scenario() -> list[Completion]:
        backend = VLLMOfflineBackend(BackendConfig(kind="vllm", model="m"), batch_window_s=0.02)
        calls = [
            backend.complete([{"role": "user", "content": f"abc{i}"}], SamplingParams())
            for i in range(10)
        ]
        results = await asyncio.gather(*calls)
        await backend.aclose()
        return results

    results = asyncio.run(scenario())
    assert batches == [10]
    assert [r.text for r in results] == [f"{i}cba" for i in range(10)]
    assert results[0].tokens_in == 2 and results[0].tokens_out == 1


def test_vllm_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    from dualview.synth.backends import build_backend

    with pytest.raises(BackendError, match="pip install 'dualview\\[vllm\\]'"):
        build_backend(BackendConfig(kind="vllm", model="m"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "runner.concurency=3"], "unknown key"),
        (["--shard", "5/2"], "shard"),
        (["--set", "task.n_star=last"], "n_star"),
    ],
)
def test_cli_config_errors_are_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from dualview.cli import main; main()", "synth", str(FIXTURE),
         str(tmp_path / "o.jsonl"), "--backend", "openai", "--base-url", "http://127.0.0.1:9",
         *extra],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_broken_custom_template_stops_the_run(tmp_path: Path) -> None:
    template = tmp_path / "mine.jinja"
    template.write_text("Query: {{ query }} and {{ no_such_variable }}")
    task = ReverseTask(ReverseConfig(template=template))
    runner = Runner(task, CountingBackend(), SamplingParams(), RunnerConfig())
    with pytest.raises(DualviewError, match="no_such_variable"):
        runner.run(lambda: task.units(iter_records(FIXTURE)), tmp_path / "o.jsonl")


def test_a_pinned_parser_edit_changes_the_cache_key_and_replays_the_older_ones(monkeypatch):
    from dualview.synth.reverse import ReverseTask

    before = ReverseTask().fingerprint()
    version = pin_parser_edit(monkeypatch, ReverseTask)
    reverse = ReverseTask()
    assert reverse.fingerprint() != before and reverse.fingerprint()["parser_version"] == version
    assert reverse.earlier_fingerprints()[0] == before
    assert "parser_version" not in reverse.earlier_fingerprints()[-1]  # version 1: old keys


class StricterReverse(ReverseTask):
    """A parser change: answers for records whose id ends in 1 or 3 are now rejected (with
    `pin_parser_edit` on ReverseTask: the edit pinned as the next version)."""

    async def run(self, unit: list[Record], llm):
        outcome = await super().run(unit, llm)
        if outcome.status == "ok" and unit[0].id.endswith(("1", "3")):
            return Outcome("rejected", reason="stricter: id ends in 1 or 3")
        return outcome


def test_a_parser_change_rejudges_cached_answers_without_asking_again(
    tmp_path: Path, monkeypatch
) -> None:
    out = tmp_path / "dv.jsonl"
    with StubServer() as server:
        first = run_task(ReverseTask(), server.base_url, FIXTURE, out)
        asked = server.requests
        pin_parser_edit(monkeypatch, ReverseTask)
        again = run_task(StricterReverse(), server.base_url, FIXTURE, out)
        assert server.requests == asked  # every answer came from the cache
        third = run_task(StricterReverse(), server.base_url, FIXTURE, out)
        assert server.requests == asked
    ids = [r.id for r in iter_records(FIXTURE)]
    dropped = sum(i.endswith(("1", "3")) for i in ids)
    assert first.outcomes.ok == 20 and 0 < dropped < 20
    assert again.outcomes.ok == 20 - dropped
    assert again.outcomes.rejected == dropped
    assert again.counts["replayed_answers"] == 20
    assert again.tokens_out == first.tokens_out  # usage of the replayed calls carried
    assert third.outcomes == again.outcomes and third.this_run_units == 0
    kept = [r["parent_id"] for r in lines(out)]
    assert kept == [i for i in ids if not i.endswith(("1", "3"))]
