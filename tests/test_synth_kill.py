"""Kill test: a 500-unit run is SIGKILLed at random moments, resumed, and must end up equal,
record for record, to an uninterrupted run: no duplicates, nothing missing, little redone."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from dualview.data.jsonl import iter_records
from dualview.data.schema import Document, Record
from dualview.io.atomic import write_jsonl
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.backends.openai_http import OpenAIBackend
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import Runner, RunnerConfig
from dualview.synth.testing import StubReply, StubServer, default_reply

UNITS = 500
CONCURRENCY = 16


def make_records(n: int) -> list[Record]:
    rng = random.Random(7)
    records = []
    for i in range(n):
        negatives = [
            Document(id=f"n{i}-{j}", text=f"Instruction negative {j} of record {i}.")
            for j in range(rng.randint(0, 3))  # some records have none: skipped
        ]
        records.append(
            Record(
                id=f"k{i:04d}",
                view="orig",
                query=f"query number {i}",
                instruction=f"Only passages of kind {i % 7} are relevant.",
                positives=[Document(id=f"p{i}", text=f"Positive passage of record {i}.")],
                instruction_negatives=negatives,
            )
        )
    return records


class JitteredStub:
    """Valid answers after a random 0-20 ms delay, so completion order differs from input order;
    every tenth record is answered 'impossible'."""

    def __init__(self) -> None:
        self.rng = random.Random(11)
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> StubReply:
        reply = default_reply(request)
        content = request["messages"][-1]["content"]
        number = int(content.rsplit("Query: query number ", 1)[1].split("\n", 1)[0])
        if number % 10 == 3:
            reply = StubReply("<answer>None</answer>")
        with self.lock:
            delay = self.rng.random() * 0.02
        return dataclasses.replace(reply, delay_s=delay)


def cache_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def cli(source: Path, out: Path, url: str) -> list[str]:
    code = "from dualview.cli import main; main()"
    return [sys.executable, "-c", code, "synth", str(source), str(out), "--backend", "openai",
            "--base-url", url, "--model", "stub", "--concurrency", str(CONCURRENCY)]  # fmt: skip


def test_sigkilled_runs_resume_to_the_uninterrupted_result(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, make_records(UNITS))
    rng = random.Random(2024)
    env = {**os.environ, "DUALVIEW_NO_PROGRESS": "1"}
    with StubServer(JitteredStub(), latency_s=0.02) as server:
        # Reference: one uninterrupted run, in-process.
        ref = tmp_path / "ref" / "out.jsonl"
        ref.parent.mkdir()
        backend = OpenAIBackend(
            BackendConfig(kind="openai", model="stub", base_url=server.base_url)
        )
        task = ReverseTask()
        runner = Runner(task, backend, SamplingParams(), RunnerConfig(concurrency=CONCURRENCY))
        ref_stats = runner.run(lambda: task.units(iter_records(source)), ref)
        reference_requests = server.requests

        # Killed runs: SIGKILL once right after start, then at random points of progress.
        out = tmp_path / "killed" / "out.jsonl"
        cache = out.with_name("out.jsonl.cache.jsonl")
        kills_mid_run = 0
        targets = sorted(rng.sample(range(30, 440), 4))
        for target in [0, *targets]:
            sent = server.requests
            process = subprocess.Popen(cli(source, out, server.base_url), env=env)
            deadline = time.monotonic() + 60
            # Kill points are events: the first request in flight (target 0), then a number
            # of units cached; each waited for, whatever the machine's speed.
            while process.poll() is None and (
                server.requests == sent if target == 0 else cache_lines(cache) < target
            ):
                assert time.monotonic() < deadline
                time.sleep(0.005)
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                kills_mid_run += target > 0
            process.wait(30)
            assert not out.exists() or target == 0  # no output before the run completed
        requests_before_final = server.requests - reference_requests

        final = subprocess.run(cli(source, out, server.base_url), env=env, timeout=120)
        assert final.returncode == 0
        redone = server.requests - reference_requests - ref_stats.llm_calls

    assert kills_mid_run >= 3
    assert requests_before_final > 0
    assert out.read_bytes() == ref.read_bytes()
    dropped = out.with_name("out.jsonl.dropped.jsonl")
    assert dropped.read_bytes() == ref.with_name("out.jsonl.dropped.jsonl").read_bytes()
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == ref_stats.outcomes.ok
    keys = [json.loads(line)["key"] for line in cache.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == UNITS  # every unit exactly once in the cache
    stats = json.loads(out.with_name("out.jsonl.stats.json").read_text())
    assert stats["outcomes"] == ref_stats.to_json()["outcomes"] and stats["complete"]
    assert ref_stats.outcomes.impossible > 0 and ref_stats.outcomes.skipped > 0
    # Work lost to the kills is at most what was in flight at each kill.
    print(f"kills mid-run: {kills_mid_run}, requests redone after kills: {redone}")
    assert 0 <= redone <= (1 + len(targets)) * CONCURRENCY
