"""The engine interface and registry: a new engine is one class and one registration, chosen
by ``runner.engine``; the one loop every engine consumes (`pending_units`) skips cached units
and hands a repeated unit out once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dualview.data.jsonl import iter_records
from dualview.data.schema import Record
from dualview.errors import ConfigError
from dualview.io.atomic import write_jsonl
from dualview.synth.backends import build_backend
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.cache import ResultCache
from dualview.synth.engine import Engine, Results, RunnerConfig, Tally, UnitSolver, pending_units
from dualview.synth.engines import engine_factory, engine_names, register_engine
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import make_runner
from dualview.synth.task import Outcome
from dualview.synth.testing import StubServer

FIXTURE = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"
OUTPUTS = ["out.jsonl", "out.jsonl.dropped.jsonl"]


class SerialEngine:
    """One unit at a time, in input order: the smallest engine there is."""

    label = " (serial)"

    def __init__(self, backend: BackendConfig, config: RunnerConfig) -> None:
        self.backend = build_backend(backend)
        self.handed_out: list[str] = []

    async def answer(self, task, params, pending, results: Results) -> None:
        solver = UnitSolver(task, self.backend, params)
        for item in pending:
            self.handed_out.append(item.key)
            outcome = await solver.solve(item.unit, item.earlier)
            results.store(item.key, item.unit[0].id, outcome)


register_engine("serial-test", SerialEngine)


def run(engine: str, url: str, source: Path, folder: Path):
    task = ReverseTask()
    backend = BackendConfig(kind="openai", model="stub", base_url=url)
    runner = make_runner(task, backend, SamplingParams(), RunnerConfig(engine=engine))
    units = lambda: task.units(iter_records(source, unique_ids=False))  # noqa: E731
    stats = runner.run(units, folder / "out.jsonl")
    return stats, runner


def test_a_registered_engine_is_chosen_by_name_and_gives_the_local_output(tmp_path: Path):
    records = list(iter_records(FIXTURE))
    source = tmp_path / "in.jsonl"
    write_jsonl(source, records + records[:5])  # five units come twice
    with StubServer() as server:
        local, _ = run("local", server.base_url, source, tmp_path / "local")
        asked_local = server.requests
        serial, runner = run("serial-test", server.base_url, source, tmp_path / "serial")
        asked_serial = server.requests - asked_local
        again, rerun = run("serial-test", server.base_url, source, tmp_path / "serial")
        asked_again = server.requests - asked_local - asked_serial
    assert isinstance(runner.engine, SerialEngine) and isinstance(runner.engine, Engine)
    for name in OUTPUTS:
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    assert serial.outcomes == local.outcomes and serial.units == len(records) + 5
    # The repeated units are answered once, by either engine.
    handed = runner.engine.handed_out
    assert len(handed) == len(set(handed)) == len(records)
    assert asked_serial == asked_local == len(records)  # one question per distinct unit
    assert serial.this_run_units == len(records)
    # A rerun finds every unit in the cache: nothing handed out, no LLM call.
    assert rerun.engine.handed_out == [] and asked_again == 0 and again.this_run_units == 0


def unit(n: int) -> list[Record]:
    positive = {"id": f"p{n}", "text": "t"}
    return [Record(id=f"r{n}", view="plain", query=f"query {n}", positives=[positive])]


def test_pending_units_skips_cached_units_and_hands_out_a_repeat_once(tmp_path: Path):
    cache = ResultCache(tmp_path / "cache.jsonl")
    cache.put("c", "r2", Outcome("impossible"))
    tally = Tally()
    changes: list[int] = []
    results = Results(cache, tally, lambda: changes.append(1))
    keyed = [("a", unit(0)), ("b", unit(1)), ("a", unit(0)), ("c", unit(2)), ("b", unit(1))]
    older = Outcome("ok", raw=["an older answer"])
    asked: list[str] = []

    def earlier(records: list[Record]) -> Outcome | None:
        asked.append(records[0].id)
        return older if records[0].id == "r0" else None

    pending = list(pending_units(keyed, results, earlier))
    assert [(p.key, p.unit[0].id, p.earlier) for p in pending] == [
        ("a", "r0", older),
        ("b", "r1", None),
    ]
    assert asked == ["r0", "r1"]  # older results looked up for units handed out only
    assert results.repeats == ["a", "b"]
    assert tally.counts == {"impossible": 1} and tally.fresh == 0  # the cached unit

    results.store("a", "r0", Outcome("ok", records=[{"id": "r0-dv"}]))
    results.store("b", "r1", Outcome("error", reason="timeout"))
    results.store("a", "r0", Outcome("rejected"))  # a second answer: the first stays
    results.count_repeats()
    assert cache.status("a") == "ok" and "b" not in cache
    assert set(results.errors) == {"b"}
    assert tally.counts == {"impossible": 1, "ok": 2, "error": 2} and tally.fresh == 2
    assert len(changes) == 4  # the skip, two fresh outcomes, the repeats
    cache.close()


def test_the_registry_chooses_by_name_then_backend_kind_and_names_what_it_knows() -> None:
    assert {"local", "ray", "serial-test"} <= set(engine_names())
    assert engine_factory("local", "vllm").__name__ == "LocalEngine"
    assert engine_factory("ray", "openai").__name__ == "RayEngine"
    assert engine_factory("ray", "vllm").__name__ == "RayVLLMEngine"
    with pytest.raises(ConfigError, match=r"unknown engine 'nope'.*local, ray"):
        make_runner(ReverseTask(), BackendConfig(), SamplingParams(), RunnerConfig(engine="nope"))


def test_the_runner_imports_no_engine() -> None:
    code = (
        "import sys, dualview.synth.runner, dualview.synth.jobs; "
        "print(sorted(m for m in sys.modules if m.startswith('dualview.synth.engines.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"
