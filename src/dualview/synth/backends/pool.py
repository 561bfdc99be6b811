"""Several OpenAI-compatible endpoints serving the same model, behind one backend.

Each request goes to the healthy endpoint with the fewest requests in flight (ties: the one
listed first). An endpoint whose calls keep failing after their own retries (``trip_after``
transient failures in a row) is taken out for ``cooldown_s`` seconds (a circuit breaker);
after that one request may probe it again, and a success puts it back. A call that fails on
one endpoint is tried on the next best one, so one dead server costs no units. When every
endpoint is out, the one that comes back first is used anyway.

The pool's ``identity`` is the model's, not the URLs': the same answers from another set of
servers reuse the cache. Per-endpoint counts (requests, failures, times taken out, mean
latency) go to the run's stats file; URLs are shown without any user info or query string,
and API keys never appear.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from dualview.synth.backends.base import (
    ChatBackend,
    Completion,
    Message,
    SamplingParams,
    TransientBackendError,
)


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment (where keys sometimes hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class Endpoint:
    """One server of the pool with its breaker state and counters."""

    url: str
    backend: ChatBackend
    inflight: int = 0
    failures_in_row: int = 0
    out_until: float = 0.0
    requests: int = 0
    ok: int = 0
    failed: int = 0
    trips: int = 0
    latency_sum: float = 0.0

    def stats(self) -> dict[str, Any]:
        return {
            "url": safe_url(self.url),
            "requests": self.requests,
            "ok": self.ok,
            "failed": self.failed,
            "taken_out": self.trips,
            "mean_latency_s": round(self.latency_sum / self.ok, 4) if self.ok else None,
        }


class EndpointPool:
    """A `ChatBackend` spreading requests over several endpoints (module docstring)."""

    def __init__(
        self,
        backends: list[tuple[str, ChatBackend]],
        *,
        trip_after: int = 3,
        cooldown_s: float = 30.0,
        clock: Any = time.monotonic,
    ) -> None:
        if not backends:
            raise ValueError("an endpoint pool needs at least one endpoint")
        self.endpoints = [Endpoint(url, backend) for url, backend in backends]
        self.identity = backends[0][1].identity
        self.trip_after = trip_after
        self.cooldown_s = cooldown_s
        self._clock = clock

    def _pick(self, tried: set[int]) -> Endpoint | None:
        now = self._clock()
        left = [(i, e) for i, e in enumerate(self.endpoints) if i not in tried]
        if not left:
            return None
        healthy = [(i, e) for i, e in left if e.out_until <= now]
        if healthy:
            return min(healthy, key=lambda item: (item[1].inflight, item[0]))[1]
        return min(left, key=lambda item: (item[1].out_until, item[0]))[1]

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion:
        """One completion from the best endpoint; on a transient failure, the next one."""
        tried: set[int] = set()
        last: TransientBackendError | None = None
        while (endpoint := self._pick(tried)) is not None:
            tried.add(self.endpoints.index(endpoint))
            endpoint.inflight += 1
            endpoint.requests += 1
            try:
                completion = await endpoint.backend.complete(messages, params)
            except TransientBackendError as exc:
                last = exc
                self._failed(endpoint)
                continue
            finally:
                endpoint.inflight -= 1
            endpoint.ok += 1
            endpoint.failures_in_row = 0
            endpoint.out_until = 0.0
            endpoint.latency_sum += completion.latency_s
            return completion
        raise TransientBackendError(f"every endpoint failed; last: {last}")

    def _failed(self, endpoint: Endpoint) -> None:
        endpoint.failed += 1
        endpoint.failures_in_row += 1
        if endpoint.failures_in_row >= self.trip_after:
            endpoint.out_until = self._clock() + self.cooldown_s
            endpoint.failures_in_row = 0
            endpoint.trips += 1

    def endpoint_stats(self) -> list[dict[str, Any]]:
        """Per-endpoint counters for the stats file (URLs without credentials)."""
        return [endpoint.stats() for endpoint in self.endpoints]

    async def aclose(self) -> None:
        for endpoint in self.endpoints:
            await endpoint.backend.aclose()
