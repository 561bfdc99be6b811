"""OpenAI-compatible chat completions over HTTP (vLLM, SGLang, llama.cpp server, Ollama, OpenAI).

Retries: 408/409/425/429, every 5xx, a 200 whose body is not a completion, connection errors
and timeouts are retried up to ``max_retries`` times, waiting
``min(retry_max_s, retry_base_s * 2**attempt)`` scaled by a random factor in [0.5, 1]
(jitter), or at least what the server asks for in ``Retry-After``. Any other
4xx cannot succeed on retry and stops the run at once (:class:`BackendError`). The API key is
read from the environment variable named by ``api_key_env`` and never appears in a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from dualview.synth.backends.base import (
    BackendConfig,
    BackendError,
    Completion,
    Message,
    SamplingParams,
    TransientBackendError,
)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with jitter: a random share in [0.5, 1] of ``min(cap, base*2**n)``."""
    return min(cap, base * (2**attempt)) * (0.5 + 0.5 * rng.random())


class ClientPool:
    """Several small ``httpx.AsyncClient`` instead of one big one.

    httpcore's connection pool does work linear in its number of connections on every request,
    so one client with hundreds of concurrent requests spends most of the CPU in bookkeeping.
    A request goes to the least busy client; a new client opens when all have ``per_client``
    requests in flight.
    """

    def __init__(self, factory: Callable[[], httpx.AsyncClient], per_client: int = 8) -> None:
        self._factory = factory
        self.per_client = per_client
        self._clients: list[httpx.AsyncClient] = []
        self._load: list[int] = []

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        index = min(range(len(self._load)), key=self._load.__getitem__, default=-1)
        if index < 0 or self._load[index] >= self.per_client:
            self._clients.append(self._factory())
            self._load.append(0)
            index = len(self._clients) - 1
        self._load[index] += 1
        try:
            yield self._clients[index]
        finally:
            self._load[index] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


def _scrub(text: str, secret: str | None) -> str:
    """A server message made safe to show: the key removed, long bodies shortened."""
    if secret:
        text = text.replace(secret, "***")
    return text if len(text) <= 300 else text[:300] + "..."


class OpenAIBackend:
    """Async client for ``POST {base_url}/chat/completions``."""

    def __init__(self, config: BackendConfig, *, rng: random.Random | None = None) -> None:
        if not config.base_url:
            raise BackendError(
                "backend openai needs base_url (e.g. http://localhost:8000/v1 for vLLM)"
            )
        self.config = config
        self.identity = f"openai:{config.model}"
        self._key = self._read_key(config.api_key_env)
        self._rng = rng or random.Random()
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        tls = ssl.create_default_context()  # built once: loading CA certificates is slow
        self._clients = ClientPool(
            lambda: httpx.AsyncClient(
                base_url=(config.base_url or "").rstrip("/"),
                headers=headers,
                timeout=httpx.Timeout(config.timeout_s),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
                verify=tls,
            )
        )

    @staticmethod
    def _read_key(env_name: str | None) -> str | None:
        if not env_name:
            return None
        key = os.environ.get(env_name)
        if not key:
            raise BackendError(f"environment variable {env_name} (api_key_env) is not set")
        return key

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
        return payload

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion:
        """One chat completion, retried on transient failures (see module docstring)."""
        payload = self._payload(messages, params)
        last_problem = "no attempt made"
        for attempt in range(self.config.max_retries + 1):
            started = time.perf_counter()
            wait_hint: float | None = None
            try:
                async with self._clients.client() as client:
                    response = await client.post("/chat/completions", json=payload)
            except httpx.TimeoutException:
                last_problem = f"timed out after {self.config.timeout_s:g} s"
            except httpx.TransportError as exc:
                last_problem = f"connection error ({type(exc).__name__})"
            else:
                if response.status_code == 200:
                    completion = self._completion(response, time.perf_counter() - started)
                    if completion is not None:
                        return completion
                    last_problem = f"malformed response: {_scrub(response.text, self._key)}"
                elif response.status_code in RETRYABLE_STATUS or response.status_code >= 500:
                    last_problem = (
                        f"HTTP {response.status_code}: {_scrub(response.text, self._key)}"
                    )
                    wait_hint = parse_retry_after(response.headers.get("retry-after"))
                else:
                    raise BackendError(
                        f"{self.config.base_url} answered HTTP {response.status_code} "
                        f"for model {self.config.model!r} (not retried): "
                        f"{_scrub(response.text, self._key)}"
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
    def _completion(response: httpx.Response, latency: float) -> Completion | None:
        """The completion in a 200 response, or None when the body is not one (retried)."""
        try:
            data = response.json()
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None
        usage = data.get("usage") or {}
        return Completion(
            text=text if isinstance(text, str) else "",
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
        )

    async def aclose(self) -> None:
        await self._clients.aclose()
