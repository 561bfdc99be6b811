"""OpenAI-compatible chat completions over HTTP (vLLM, SGLang, llama.cpp server, Ollama, OpenAI).

Retries: 408/409/425/429, every 5xx, a 200 whose body is not a completion, connection errors
and timeouts are retried up to ``max_retries`` times, waiting
``min(retry_max_s, retry_base_s * 2**attempt)`` scaled by a random factor in [0.5, 1]
(jitter), or what the server asks for in ``Retry-After`` when that is longer, but never
more than ``retry_max_s`` (a server asking for days, or a date in year 9999, does not stall
the run: the call is retried after ``retry_max_s``, then given up as usual). Any other
4xx cannot succeed on retry and stops the run at once (`BackendError`). The API key is
read from the environment variable named by ``api_key_env`` and never appears in a message.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import time
import urllib.request
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from pydantic import Field

from dualview.io.files import replace_lone_surrogates
from dualview.synth.backends.base import (
    BackendConfig,
    BackendError,
    BackendKind,
    ChatBackend,
    Completion,
    Message,
    SamplingParams,
    TransientBackendError,
)
from dualview.synth.backends.pool import EndpointPool


class OpenAIConfig(BackendConfig):
    """``backend.kind: openai``: a server and how to call it. API keys are read from
    ``api_key_env``."""

    kind: Literal["openai"] = "openai"
    # One URL, or several serving the same model (requests go to the least busy; see pool.py).
    base_url: str | list[str] | None = None
    # NAME of the environment variable that holds the API key (never the key itself).
    api_key_env: str | None = None
    timeout_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    max_retries: int = Field(default=6, ge=0)
    # Exponential backoff between retries: base * 2**attempt, capped, with full jitter. The
    # cap bounds a server's Retry-After too.
    retry_base_s: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    retry_max_s: float = Field(default=60.0, ge=0, allow_inf_nan=False)
    # Several base URLs: an endpoint failing this many calls in a row is out for cooldown_s.
    trip_after: int = 3
    cooldown_s: float = 30.0


RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
JSON_HEADERS = {"Content-Type": "application/json"}


def parse_retry_after(
    value: str | None, now: float | None = None, cap: float = math.inf
) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date), at
    most ``cap``; None for a header that is neither (``nan``, ``soon``)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = _seconds_until(value, time.time() if now is None else now)
    if seconds is None or math.isnan(seconds):
        return None
    return min(cap, max(0.0, seconds))


def _seconds_until(date: str, now: float) -> float | None:
    """Seconds from ``now`` to an HTTP date (negative when past); None if it is not one."""
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError, OverflowError):
        return None
    if when is None:
        return None
    try:
        return when.timestamp() - now
    except (OverflowError, OSError, ValueError):  # beyond what the platform's clock holds
        return math.inf


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with jitter: a random share in [0.5, 1] of ``min(cap, base*2**n)``."""
    return min(cap, base * (2**attempt)) * (0.5 + 0.5 * rng.random())


def env_proxy(url: str) -> str | None:
    """The proxy that ``HTTP_PROXY``/``HTTPS_PROXY`` name for ``url``, or None (none set, or
    ``NO_PROXY`` exempts its host). Read once per backend: aiohttp's ``trust_env`` looks the
    environment up again on every request, which cost 0.37 ms of CPU per request here."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _scrub(text: str, secret: str | None) -> str:
    """A server message made safe to show: the key removed, long bodies shortened."""
    if secret:
        text = text.replace(secret, "***")
    return text if len(text) <= 300 else text[:300] + "..."


class OpenAIBackend:
    """Async client for ``POST {base_url}/chat/completions``.

    One ``aiohttp`` session per event loop, opened at the first request (a Ray task runs its
    own loop) and closed by `aclose`; its connector keeps connections alive and sets no
    limit of its own, since the runner's concurrency already bounds the requests in flight.
    The client's CPU per request is what caps one runner process at high concurrency: at 256
    requests in flight the runner used 1.7 ms per record with httpx and 0.66 ms with this
    client (``benchmarks/synth_throughput.py``, 2 cores).
    """

    def __init__(self, config: OpenAIConfig, *, rng: random.Random | None = None) -> None:
        if not config.base_url:
            raise BackendError(
                "backend openai needs base_url (e.g. http://localhost:8000/v1 for vLLM)"
            )
        self.config = config
        self.identity = f"openai:{config.model}"
        self._key = self._read_key(config.api_key_env)
        self._rng = rng or random.Random()
        self._url = str(config.base_url).rstrip("/") + "/chat/completions"
        self._headers = {**JSON_HEADERS}
        if self._key:
            self._headers["Authorization"] = f"Bearer {self._key}"
        self._proxy = env_proxy(self._url)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @staticmethod
    def _read_key(env_name: str | None) -> str | None:
        if not env_name:
            return None
        key = os.environ.get(env_name)
        if not key:
            raise BackendError(f"environment variable {env_name} (api_key_env) is not set")
        return key

    def _open_session(self) -> aiohttp.ClientSession:
        """The session of the running loop (a new one after `aclose` or a new loop)."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),  # TLS verified, context cached
                timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
                headers=self._headers,
            )
            self._session, self._loop = session, loop
        return session

    def _payload(self, messages: list[Message], params: SamplingParams) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        if params.stop:
            payload["stop"] = params.stop
        if params.regex:  # constrained output: vLLM's (and SGLang's) guided-decoding field
            payload["guided_regex"] = params.regex
        return payload

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion:
        """One chat completion, retried on transient failures (see module docstring)."""
        body = json.dumps(self._payload(messages, params)).encode()
        last_problem = "no attempt made"
        for attempt in range(self.config.max_retries + 1):
            started = time.perf_counter()
            wait_hint: float | None = None
            try:
                session = self._open_session()
                async with session.post(self._url, data=body, proxy=self._proxy) as response:
                    status, raw = response.status, await response.read()
                    retry_after = response.headers.get("Retry-After")
            except TimeoutError:  # asyncio's and aiohttp's timeouts both derive from it
                last_problem = f"timed out after {self.config.timeout_s:g} s"
            except aiohttp.ClientError as exc:
                last_problem = f"connection error ({type(exc).__name__})"
            else:
                text = raw.decode("utf-8", errors="replace")
                if status == 200:
                    completion = self._completion(raw, time.perf_counter() - started)
                    if completion is not None:
                        return completion
                    last_problem = f"malformed response: {_scrub(text, self._key)}"
                elif status in RETRYABLE_STATUS or status >= 500:
                    last_problem = f"HTTP {status}: {_scrub(text, self._key)}"
                    wait_hint = parse_retry_after(retry_after, cap=self.config.retry_max_s)
                else:
                    raise BackendError(
                        f"{self.config.base_url} answered HTTP {status} "
                        f"for model {self.config.model!r} (not retried): "
                        f"{_scrub(text, self._key)}"
                    )
            if attempt == self.config.max_retries:
                break
            delay = backoff_delay(
                attempt, self.config.retry_base_s, self.config.retry_max_s, self._rng
            )
            await asyncio.sleep(max(delay, wait_hint or 0.0))
        raise TransientBackendError(
            f"gave up after {self.config.max_retries + 1} attempt(s): {last_problem}"
        )

    @staticmethod
    def _completion(body: bytes, latency: float) -> Completion | None:
        """The completion in a 200 response body, or None when it is not one (retried):
        not UTF-8, not JSON, or without ``choices[0].message.content``."""
        try:
            data = json.loads(body.decode("utf-8"))
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            usage = {}
        return Completion(
            text=replace_lone_surrogates(text) if isinstance(text, str) else "",
            tokens_in=_count(usage.get("prompt_tokens")),
            tokens_out=_count(usage.get("completion_tokens")),
            latency_s=latency,
        )

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _count(value: Any) -> int:
    """A token count from the usage block; anything that is not a finite number (``1e999``
    parses as infinity, ``NaN`` too) counts as 0."""
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError, OverflowError):
        return 0


def build_openai(config: OpenAIConfig) -> ChatBackend:
    """One endpoint: an `OpenAIBackend`; several distinct base URLs: an `EndpointPool`."""
    if isinstance(config.base_url, list):
        urls = list(dict.fromkeys(config.base_url))
        if len(urls) > 1:
            each = [
                (url, OpenAIBackend(config.model_copy(update={"base_url": url}))) for url in urls
            ]
            return EndpointPool(each, trip_after=config.trip_after, cooldown_s=config.cooldown_s)
        config = config.model_copy(update={"base_url": urls[0] if urls else None})
    return OpenAIBackend(config)


OPENAI = BackendKind(OpenAIConfig, build_openai)
