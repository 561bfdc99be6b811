"""What every LLM backend provides: an async chat completion with token counts.

Backends: ``openai`` (any OpenAI-compatible HTTP server: vLLM, SGLang, llama.cpp server,
Ollama, OpenAI), ``local`` (an in-process model; the embedded Qwen2.5-Coder-0.5B GGUF by
default, or any local Hugging Face causal LM path), ``vllm`` (offline batch generation on a
GPU node). The runner only sees `ChatBackend`. Each kind is registered in `BACKENDS` with its
own config class (a `BackendConfig` subclass) and the factory that builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from dualview.config import StrictModel
from dualview.errors import DualviewError
from dualview.models.gguf import EMBEDDED_LLM
from dualview.registry import Registry

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


DEFAULT_KIND = "local"


class BackendConfig(StrictModel):
    """Which LLM answers: ``kind`` (a name in `BACKENDS`) and ``model``; each kind's config
    class derives from this one and adds its own settings (`openai_http.OpenAIConfig`,
    `local.LocalConfig`, `vllm_offline.VLLMConfig`), so a setting of another kind is an
    error naming it.

    ``BackendConfig(**settings)`` and a ``backend:`` field typed ``BackendConfig`` build the
    config class of ``settings["kind"]`` (default ``local``), looked up in `BACKENDS`, so a
    kind registered by a plugin is accepted wherever a backend is configured.
    """

    kind: str = DEFAULT_KIND
    # Model name sent to the server (openai/vllm), or a local path / embedded name (local).
    model: str = EMBEDDED_LLM

    def __new__(cls, /, **settings: Any) -> BackendConfig:
        if cls is BackendConfig:
            kind = settings.get("kind", DEFAULT_KIND)
            if isinstance(kind, str):
                cls = BACKENDS.get(kind).config
        return super().__new__(cls)

    @model_validator(mode="wrap")
    @classmethod
    def _kind_config(cls, data: Any, handler: ModelWrapValidatorHandler) -> Any:
        """Through this class: the registered kind's config class validates ``data``; in a
        kind's class: a setting it does not have is an error naming the setting."""
        if not isinstance(data, Mapping):
            return handler(data)
        if cls is BackendConfig:
            return _kind_class(data.get("kind", DEFAULT_KIND)).model_validate(data)
        foreign = [key for key in data if key not in cls.model_fields]
        if foreign:
            raise _located(cls, foreign, data)
        return handler(data)

    def tokenizer_name(self) -> str | None:
        """The Hugging Face name or path whose tokenizer counts this backend's tokens for an
        estimate (loaded offline only; None or a failed load: one token per 4 characters)."""
        return self.model


@dataclass(frozen=True)
class BackendKind:
    """A registered backend kind: its config class (a `BackendConfig` subclass whose
    ``kind`` is the registered name) and the factory that builds the backend from it."""

    config: type[BackendConfig]
    build: Callable[[Any], ChatBackend]

    def __post_init__(self) -> None:
        if not (isinstance(self.config, type) and issubclass(self.config, BackendConfig)):
            raise TypeError(f"{self.config!r}: a backend's config class derives from BackendConfig")


#: ``backend.kind`` -> `BackendKind`. Built-in kinds by ``module:attribute`` path (a kind's
#: module is imported when a config names it); plugins: entry-point group
#: ``dualview.backends`` or ``BACKENDS.register("name", BackendKind(Config, factory))``.
BACKENDS: Registry[BackendKind] = Registry(
    "backend kind",
    field="backend.kind",
    group="dualview.backends",
    entries={
        "local": "dualview.synth.backends.local:LOCAL",
        "openai": "dualview.synth.backends.openai_http:OPENAI",
        "vllm": "dualview.synth.backends.vllm_offline:VLLM",
    },
)


def _kind_class(kind: object) -> type[BackendConfig]:
    """The config class of ``kind``; an unknown kind is a validation error at ``kind``."""
    if not isinstance(kind, str) or kind not in BACKENDS:
        message = BACKENDS.unknown_message(kind, where="")
        raise _error("BackendConfig", [("kind", "unknown_backend_kind", message, kind)])
    return BACKENDS.get(kind).config


def _located(cls: type[BackendConfig], keys: list[str], data: Mapping) -> ValidationError:
    """One error per setting that ``cls`` (one backend kind's config) does not have."""
    kind = data.get("kind", cls.model_fields["kind"].default)
    own = ", ".join(cls.model_fields)
    message = f"not a setting of backend kind {kind!r} (its settings: {own})"
    return _error(cls.__name__, [(key, "backend_setting", message, data[key]) for key in keys])


def _error(title: str, problems: list[tuple[str, str, str, Any]]) -> ValidationError:
    """A `ValidationError` with one error per ``(key, type, message, input)``."""
    details = [
        InitErrorDetails(
            type=PydanticCustomError(error_type, "{message}", {"message": message}),
            loc=(key,),
            input=value,
        )
        for key, error_type, message, value in problems
    ]
    return ValidationError.from_exception_data(title, details)


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
