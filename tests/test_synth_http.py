"""The aiohttp client's proxy lookup and event-loop handling, the runner's turnstile, and the
stub server's latency jitter."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.backends.openai_http import OpenAIBackend, env_proxy
from dualview.synth.task import Turnstile
from dualview.synth.testing import StubReply, StubServer


def test_env_proxy_follows_https_proxy_and_no_proxy(monkeypatch) -> None:
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1,.internal")
    assert env_proxy("https://api.example.com/v1/chat/completions") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    assert env_proxy("https://api.example.com/v1/chat/completions") == "http://proxy.corp:3128"
    assert env_proxy("http://api.example.com/v1") is None  # only HTTPS_PROXY is set
    assert env_proxy("https://127.0.0.1:8000/v1") is None
    assert env_proxy("https://vllm.internal/v1") is None


def test_one_backend_serves_two_event_loops() -> None:
    """A runner may call asyncio.run more than once with the same backend (a session per loop)."""
    params = SamplingParams()
    with StubServer(lambda request: StubReply("hello there")) as server:
        config = BackendConfig(kind="openai", model="stub", base_url=server.base_url)
        backend = OpenAIBackend(config)

        async def ask() -> str:
            text = (await backend.complete([{"role": "user", "content": "hi"}], params)).text
            await backend.aclose()
            return text

        assert asyncio.run(ask()) == "hello there"
        assert asyncio.run(ask()) == "hello there"
        assert server.requests == 2


def test_turnstile_lets_one_waiter_through_per_loop_iteration() -> None:
    """Four coroutines reach the turnstile together; a ticker that yields once per loop
    iteration must get a tick in between every two of them (without the turnstile, all four
    would pass in one iteration, back to back)."""
    log: list[str] = []

    async def main(turnstile: Turnstile | None) -> None:
        async def waiter(name: str) -> None:
            if turnstile is not None:
                await turnstile.through()
            log.append(name)

        async def ticker() -> None:
            for _ in range(20):
                await asyncio.sleep(0)
                log.append("tick")

        await asyncio.gather(ticker(), *(waiter(f"w{i}") for i in range(4)))

    asyncio.run(main(Turnstile()))
    passes = [i for i, entry in enumerate(log) if entry != "tick"]
    assert [log[i] for i in passes] == ["w0", "w1", "w2", "w3"]  # first come, first through
    assert all(b - a > 1 for a, b in itertools.pairwise(passes)), log
    log.clear()
    asyncio.run(main(None))
    passes = [i for i, entry in enumerate(log) if entry != "tick"]
    assert passes == list(range(passes[0], passes[0] + 4))  # the control: back to back


def test_stub_jitter_spreads_latency_around_its_mean() -> None:
    server = StubServer(latency_s=0.2, jitter=0.5, seed=3)
    waits = [server._latency() for _ in range(2000)]
    assert min(waits) >= 0.1 and max(waits) <= 0.3
    assert abs(sum(waits) / len(waits) - 0.2) < 0.005
    assert len(set(waits)) > 1000
    assert StubServer(latency_s=0.2)._latency() == 0.2
    with pytest.raises(ValueError, match="jitter"):
        StubServer(jitter=1.0)
