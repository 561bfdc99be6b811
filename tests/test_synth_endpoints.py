"""Several endpoints in the local runner: least-busy routing, circuit breaker, per-endpoint
stats, and output byte-identical to a one-endpoint run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualview.io.atomic import write_jsonl
from dualview.synth.backends import build_backend
from dualview.synth.backends.base import (
    BackendConfig,
    Completion,
    SamplingParams,
    TransientBackendError,
)
from dualview.synth.backends.pool import EndpointPool, safe_url
from dualview.synth.testing import StubReply, StubServer
from tests.test_synth_kill import make_records


class Fake:
    """A backend that fails while ``broken`` and otherwise answers after ``delay`` s."""

    identity = "openai:stub"

    def __init__(self, delay: float = 0.0) -> None:
        self.broken = False
        self.delay = delay
        self.calls = 0

    async def complete(self, messages, params) -> Completion:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.broken:
            raise TransientBackendError("HTTP 503")
        return Completion("ok", latency_s=self.delay)

    async def aclose(self) -> None:
        pass


def test_requests_go_to_the_least_busy_endpoint() -> None:
    a, b = Fake(0.01), Fake(0.01)
    pool = EndpointPool([("http://a/v1", a), ("http://b/v1", b)])

    async def go() -> None:
        await asyncio.gather(*(pool.complete([], SamplingParams()) for _ in range(10)))

    asyncio.run(go())
    assert (a.calls, b.calls) == (5, 5)  # ten at once: alternate by load
    asyncio.run(pool.complete([], SamplingParams()))
    assert (a.calls, b.calls) == (6, 5)  # idle pool: ties go to the first listed


def test_failing_endpoint_is_taken_out_and_retried_after_cooldown() -> None:
    now = [0.0]
    bad, good = Fake(), Fake()
    bad.broken = True
    pool = EndpointPool(
        [("http://bad/v1", bad), ("http://good/v1", good)],
        trip_after=2,
        cooldown_s=10.0,
        clock=lambda: now[0],
    )
    for _ in range(6):  # no unit is lost: each failure moves on to the good endpoint
        assert asyncio.run(pool.complete([], SamplingParams())).text == "ok"
    assert bad.calls == 2  # tripped after two failures, then skipped
    assert good.calls == 6
    now[0] = 10.0  # cooldown over: the bad endpoint is probed again, and now it works
    bad.broken = False
    asyncio.run(pool.complete([], SamplingParams()))
    assert bad.calls == 3
    stats = {s["url"]: s for s in pool.endpoint_stats()}
    assert stats["http://bad/v1"]["failed"] == 2 and stats["http://bad/v1"]["taken_out"] == 1
    assert stats["http://bad/v1"]["ok"] == 1 and stats["http://good/v1"]["ok"] == 6


def test_every_endpoint_down_is_a_transient_error() -> None:
    a, b = Fake(), Fake()
    a.broken = b.broken = True
    pool = EndpointPool([("http://a/v1", a), ("http://b/v1", b)])
    with pytest.raises(TransientBackendError, match="every endpoint failed"):
        asyncio.run(pool.complete([], SamplingParams()))


def test_urls_in_stats_lose_credentials_and_identity_ignores_urls() -> None:
    assert safe_url("https://user:sk-secret@h:8000/v1?key=sk-2") == "https://h:8000/v1"
    one = build_backend(BackendConfig(kind="openai", model="m", base_url=["http://x/v1"]))
    two = build_backend(
        BackendConfig(kind="openai", model="m", base_url=["http://x/v1", "http://y/v1"])
    )
    assert isinstance(two, EndpointPool) and not isinstance(one, EndpointPool)
    assert one.identity == two.identity  # cache keys do not depend on the servers


def cli(source: Path, out: Path, urls: list[str]) -> list[str]:
    code = "from dualview.cli import main; main()"
    flags = [arg for url in urls for arg in ("--base-url", url)]
    return [sys.executable, "-c", code, "synth", str(source), str(out), "--backend", "openai",
            "--model", "stub", "--concurrency", "16", *flags]  # fmt: skip


def test_two_endpoints_one_down_give_the_one_endpoint_output(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, make_records(120))
    env = {**os.environ, "DUALVIEW_NO_PROGRESS": "1"}
    down = StubServer(lambda request: StubReply(status=503, body="down"))
    with StubServer() as a, StubServer() as b, down:
        single = tmp_path / "one" / "out.jsonl"
        subprocess.run(cli(source, single, [a.base_url]), env=env, check=True, timeout=120)
        pooled = tmp_path / "two" / "out.jsonl"
        urls = [a.base_url, b.base_url]
        subprocess.run(cli(source, pooled, urls), env=env, check=True, timeout=120)
        flaky = tmp_path / "flaky" / "out.jsonl"
        # The down endpoint first: its retries would cost ~minutes, the breaker takes it out.
        run = cli(source, flaky, [down.base_url, a.base_url])
        subprocess.run([*run, "--config", str(_fast_retry(tmp_path))], env=env, check=True)
    assert pooled.read_bytes() == single.read_bytes() == flaky.read_bytes()
    stats = json.loads(pooled.with_name("out.jsonl.stats.json").read_text())
    served = [e["ok"] for e in stats["endpoints"]]
    assert len(served) == 2 and min(served) > 0 and sum(served) == stats["llm_calls"]
    flaky_stats = json.loads(flaky.with_name("out.jsonl.stats.json").read_text())
    out, ok = flaky_stats["endpoints"]
    assert out["taken_out"] >= 1 and out["ok"] == 0 and ok["ok"] == flaky_stats["llm_calls"]
    assert flaky_stats["complete"] and flaky_stats["outcomes"] == stats["outcomes"]


def _fast_retry(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        "backend: {kind: openai, model: stub, max_retries: 0, retry_base_s: 0.01,"
        " trip_after: 2, cooldown_s: 600}\n"
    )
    return path


def test_engine_ray_without_ray_installed_is_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, make_records(3))
    code = (
        "import sys; sys.modules['ray'] = None\n"  # as if ray were not installed
        "from dualview.cli import main; main()"
    )
    out = str(tmp_path / "o.jsonl")
    flags = ["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--engine", "ray"]
    run = [sys.executable, "-c", code, "synth", str(source), out, *flags]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "error: engine ray needs Ray Data: pip install 'dualview[ray]'" in done.stderr
    assert not (tmp_path / "o.jsonl").exists()
