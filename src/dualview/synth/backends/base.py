"""What every LLM backend provides: an async chat completion with token counts.

Backends: ``openai`` (any OpenAI-compatible HTTP server: vLLM, SGLang, llama.cpp server,
Ollama, OpenAI), ``local`` (an in-process model; the embedded Qwen2.5-Coder-0.5B GGUF by
default, or any local Hugging Face causal LM path), ``vllm`` (offline batch generation on a
GPU node). The runner only sees `ChatBackend`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from pydantic import Field, field_validator

from dualview.config import StrictModel
from dualview.errors import DualviewError
from dualview.models.gguf import EMBEDDED_LLM

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}


class SamplingParams(StrictModel):
    """Sampling settings; part of the synthesis cache key (except ``regex``, see there)."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = 0
    stop: list[str] | None = None
    # Constrained output: the answer must match this regular expression. Set per request by a
    # task whose config asks for it (``constrained: true``); that config is in the cache key,
    # so the regex itself stays out of every dump (keys of unconstrained runs are unchanged).
    # Engines: OpenVINO GenAI (StructuredOutputConfig) and OpenAI-compatible servers that
    # read vLLM's ``guided_regex``; the others refuse it (`constraint_unsupported`).
    regex: str | None = Field(default=None, exclude=True)

    @field_validator("regex")
    @classmethod
    def _set_by_tasks_only(cls, value: str | None) -> str | None:
        """A regex from a config would be missing from the cache key: tasks set it, through
        ``model_copy`` (which skips validation), from a ``constrained`` option that is keyed."""
        if value is not None:
            raise ValueError("set by a task's `constrained: true`, not in a config")
        return value


class BackendConfig(StrictModel):
    """Which LLM answers, and how to reach it. API keys are read from ``api_key_env``."""

    kind: Literal["openai", "local", "vllm"] = "local"
    # Model name sent to the server (openai/vllm), or a local path / embedded name (local).
    model: str = EMBEDDED_LLM
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
    # Local backend only.
    engine: Literal["auto", "openvino", "llama_cpp", "transformers"] = "auto"
    n_threads: int | None = None
    n_ctx: int = 4096


class BackendError(DualviewError):
    """A backend failure that retrying cannot fix (bad key, unknown model, bad request):
    the run stops with this one-line message. Never contains an API key."""


def constraint_unsupported(engine: str) -> BackendError:
    """The error of an engine asked for constrained output that it cannot give."""
    return BackendError(
        f"engine {engine} cannot constrain the answer (constrained: true); use the openvino "
        "engine or an OpenAI-compatible server with guided decoding (vLLM), or constrained: false"
    )


class TransientBackendError(Exception):
    """A call that still failed after all retries (rate limit, 5xx, timeout, connection):
    the runner records the unit as ``error`` (not cached) so that a rerun retries it."""


@dataclass
class Completion:
    """One answer with its cost: prompt and completion tokens, wall latency."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    extra: dict = field(default_factory=dict)


@runtime_checkable
class ChatBackend(Protocol):
    """An LLM that answers chat messages. ``identity`` names the model for cache keys."""

    identity: str

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass
class AnswerScore:
    """How much more likely the first of two answers is than the second as the reply's next
    token after a prompt: ``log p(first) - log p(second)``, with the prompt's cost."""

    logodds: float
    tokens_in: int = 0
    latency_s: float = 0.0


@runtime_checkable
class AnswerScorer(Protocol):
    """A backend that scores answers without generating (the local backend, on the engines
    that give log-probabilities: OpenVINO GenAI and transformers)."""

    async def score_answers(
        self, messages: list[Message], prefix: str, answers: tuple[str, str]
    ) -> AnswerScore:
        """The log-odds of ``answers[0]`` against ``answers[1]`` as the first token of the
        reply after ``messages`` (chat template applied, assistant turn opened) and the
        reply's start ``prefix``; each answer must be one token."""
        ...


def scoring_unsupported(what: str) -> BackendError:
    """The error of a backend or engine asked to score answers (``verify.scoring: logodds``)
    that cannot give log-probabilities."""
    return BackendError(
        f"{what} cannot score answers (verify.scoring: logodds needs log-probabilities); use "
        "backend.kind: local with engine openvino or transformers, or another verify.scoring"
    )
