"""``backend.kind: echo``: a deterministic LLM stand-in that answers each chat with the last
line of its last message, after ``prefix``. Its config is its own (``prefix``); a setting
of another kind (``n_ctx``) is an error naming it."""

from __future__ import annotations

from typing import Literal

from dualview.synth.backends import BackendConfig, BackendKind
from dualview.synth.backends.base import Completion, Message, SamplingParams


class EchoConfig(BackendConfig):
    """The echo backend's settings."""

    kind: Literal["echo"] = "echo"
    prefix: str = ""


class EchoBackend:
    """Answers at once, counting one token per word."""

    def __init__(self, config: EchoConfig) -> None:
        self.config = config
        self.identity = f"echo:{config.model}:{config.prefix}"  # what changes the answers

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion:
        prompt = messages[-1]["content"]
        answer = self.config.prefix + prompt.strip().splitlines()[-1]
        return Completion(answer, tokens_in=len(prompt.split()), tokens_out=len(answer.split()))

    async def aclose(self) -> None:
        return None


KIND = BackendKind(EchoConfig, EchoBackend)
