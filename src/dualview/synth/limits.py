"""Optional requests/min and tokens/min limits, shared by all concurrent calls of a run."""

from __future__ import annotations

import asyncio
import time


class RateLimiter:
    """A pacing limiter (generic cell rate algorithm): ``amount`` units per minute.

    Each acquisition books ``amount / rate`` seconds on a virtual clock and sleeps until its
    slot. Up to ``burst_s`` seconds of unused capacity may be spent at once. Bookings can be
    corrected afterwards (`adjust`), e.g. when the real token count is known.
    """

    def __init__(self, per_minute: float, burst_s: float = 1.0) -> None:
        if per_minute <= 0:
            raise ValueError("a rate limit must be positive")
        self.rate = per_minute / 60.0
        self.burst_s = burst_s
        self._next = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self, amount: float = 1.0) -> None:
        async with self._lock:
            now = time.monotonic()
            start = max(self._next, now - self.burst_s)
            self._next = start + amount / self.rate
            delay = start - now
        if delay > 0:
            await asyncio.sleep(delay)

    def adjust(self, amount: float) -> None:
        """Book ``amount`` more (or, negative, give back) without waiting."""
        self._next += amount / self.rate


class Limits:
    """The limits of one run. Tokens are booked as prompt estimate + ``max_tokens`` before a
    call, then corrected to the real usage reported by the backend."""

    def __init__(
        self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None
    ) -> None:
        self.requests = RateLimiter(requests_per_minute) if requests_per_minute else None
        self.tokens = RateLimiter(tokens_per_minute) if tokens_per_minute else None

    @property
    def active(self) -> bool:
        return self.requests is not None or self.tokens is not None

    async def before_call(self, prompt: str, max_tokens: int) -> int:
        """Wait for a slot; returns the tokens booked (to pass to `after_call`)."""
        if self.requests is not None:
            await self.requests.acquire(1)
        booked = 0
        if self.tokens is not None:
            booked = len(prompt) // 4 + max_tokens
            await self.tokens.acquire(booked)
        return booked

    def after_call(self, booked: int, used: int) -> None:
        if self.tokens is not None and used > 0:
            self.tokens.adjust(used - booked)
