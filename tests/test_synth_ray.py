"""Ray Data engine: reverse + verify over 300 records on a local Ray cluster with two stub
endpoints give exactly the local runner's output; a Ray worker SIGKILLed mid-job loses and
duplicates nothing."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from dualview.data.jsonl import iter_records
from dualview.io.atomic import write_jsonl
from dualview.synth.backends import build_backend
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.job_stats import JobStats
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import Runner, RunnerConfig
from dualview.synth.testing import StubServer
from dualview.synth.verify import VerifyTask
from tests.test_synth_kill import JitteredStub, make_records

ray = pytest.importorskip("ray")

UNITS = 300


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def run_stage(task, urls: list[str], source: Path, out: Path, engine: str) -> dict:
    from dualview.synth.engines.ray import RayEngine

    backend = BackendConfig(kind="openai", model="stub", base_url=urls)
    config = RunnerConfig(concurrency=32, engine=engine, ray_batch_size=32)
    if engine == "ray":
        runner = Runner(task, RayEngine(backend, config), SamplingParams(), config)
    else:
        runner = Runner(task, build_backend(backend), SamplingParams(), config)
    return runner.run(lambda: task.units(iter_records(source)), out)


def pipeline(urls: list[str], source: Path, root: Path, engine: str) -> list[JobStats]:
    reversed_ = root / "reverse.jsonl"
    first = run_stage(ReverseTask(), urls, source, reversed_, engine)
    second = run_stage(VerifyTask(), urls, reversed_, root / "verify.jsonl", engine)
    return [first, second]


def outputs(root: Path) -> list[bytes]:
    names = ["reverse.jsonl", "reverse.jsonl.dropped.jsonl", "verify.jsonl"]
    return [(root / name).read_bytes() for name in [*names, "verify.jsonl.dropped.jsonl"]]


@pytest.mark.slow
def test_ray_engine_matches_local_runner_and_survives_a_killed_worker(
    tmp_path: Path, cluster
) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, make_records(UNITS))
    with StubServer(JitteredStub(), latency_s=0.01) as a, StubServer(JitteredStub()) as b:
        urls = [a.base_url, b.base_url]
        local = pipeline(urls, source, tmp_path / "local", "local")
        on_ray = pipeline(urls, source, tmp_path / "ray", "ray")
        assert outputs(tmp_path / "ray") == outputs(tmp_path / "local")
        for ours, theirs in zip(on_ray, local, strict=True):
            assert ours.outcomes == theirs.outcomes and ours.complete
        # Exact counts: every 10th record answered 'impossible', records without
        # instruction negatives skipped (make_records is seeded).
        nonzero = {k: v for k, v in local[0].outcomes.items() if v}
        assert nonzero == expected_outcomes(make_records(UNITS))
        assert sum(e["ok"] for e in on_ray[0].endpoints or []) == on_ray[0].llm_calls

        # Killed worker: SIGKILL one Ray worker while the reverse stage runs.
        killed_root = tmp_path / "killed"
        killer = threading.Thread(target=kill_a_worker_after, args=(a, 40), daemon=True)
        killer.start()
        killed = pipeline(urls, source, killed_root, "ray")
        killer.join(30)
    assert getattr(killer, "victim", None), "no Ray worker was killed mid-job"
    assert outputs(killed_root) == outputs(tmp_path / "local")
    keys = [json.loads(x)["key"] for x in (killed_root / "reverse.jsonl.cache.jsonl").open()]
    assert len(keys) == len(set(keys)) == UNITS  # nothing duplicated, nothing lost
    assert killed[0].outcomes == local[0].outcomes


def expected_outcomes(records) -> dict[str, int]:
    """Reverse skips records without instruction negatives; the stub answers 'impossible'
    for query numbers ending in 3."""
    skipped = sum(not r.instruction_negatives for r in records)
    impossible = sum(bool(r.instruction_negatives) and i % 10 == 3 for i, r in enumerate(records))
    counts = {"ok": len(records) - skipped - impossible, "impossible": impossible}
    return {**counts, "skipped": skipped}


def kill_a_worker_after(server: StubServer, requests: int) -> None:
    """SIGKILL the pid of one Ray worker busy on a map task once ``server`` saw requests.

    Only a descendant of this process qualifies (the cluster fixture's ``ray.init`` starts
    the raylet, which starts the workers): a Ray job of someone else on the host is never hit.
    """
    import psutil

    start = server.requests
    deadline = time.monotonic() + 60
    while server.requests - start < requests and time.monotonic() < deadline:
        time.sleep(0.005)
    for process in psutil.Process(os.getpid()).children(recursive=True):
        try:
            title = " ".join(process.cmdline())
        except psutil.Error:  # ended meanwhile
            continue
        if title.startswith("ray::") and "Map" in title:
            os.kill(process.pid, signal.SIGKILL)
            threading.current_thread().victim = process.pid  # type: ignore[attr-defined]
            return
    threading.current_thread().victim = None  # type: ignore[attr-defined]
