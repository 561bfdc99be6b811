"""vLLM offline batch generation for GPU nodes, behind the same async interface.

The runner calls `VLLMOfflineBackend.complete` for many units at once; requests that
arrive within ``batch_window_s`` of each other are gathered and handed to ``LLM.chat`` as one
batch in a worker thread, so vLLM's continuous batching sees the whole concurrency window.
Requests with different sampling settings are batched separately.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any, Literal

from dualview.synth.backends.base import (
    BackendConfig,
    BackendError,
    BackendKind,
    Completion,
    Message,
    SamplingParams,
    constraint_unsupported,
)


class VLLMConfig(BackendConfig):
    """``backend.kind: vllm``: vLLM in this process on a GPU node (``model``: a Hub name or
    a local path); ``n_ctx`` is its ``max_model_len``."""

    kind: Literal["vllm"] = "vllm"
    n_ctx: int = 4096


def import_vllm() -> Any:
    """The ``vllm`` module, or a clear error saying how to get it."""
    try:
        return importlib.import_module("vllm")
    except ImportError:
        raise BackendError(
            "backend vllm needs the vllm package on a GPU node: pip install 'dualview[vllm]' "
            "(or use --llm-backend openai against a running vLLM server)"
        ) from None


class VLLMOfflineBackend:
    """In-process vLLM engine; ``model`` is a Hub name or a local path."""

    def __init__(
        self, config: VLLMConfig, *, batch_window_s: float = 0.05, max_batch: int = 1024
    ) -> None:
        self._vllm = import_vllm()
        self.config = config
        self.identity = f"vllm:{config.model}"
        self.batch_window_s = batch_window_s
        self.max_batch = max_batch
        self._llm = self._vllm.LLM(model=config.model, max_model_len=config.n_ctx)
        self._pending: list[tuple[list[Message], SamplingParams, asyncio.Future]] = []
        self._timer: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    def _sampling(self, params: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            seed=params.seed,
            stop=params.stop,
        )

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion:
        if params.regex:  # batches group by the dump, which leaves the regex out
            raise constraint_unsupported("vllm (offline)")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append((messages, params, future))
        if len(self._pending) >= self.max_batch:
            self._spawn(self._flush(self._take()))
        elif self._timer is None or self._timer.done():
            self._timer = self._spawn(self._flush_later())
        return await future

    def _take(self) -> list:
        batch, self._pending = self._pending, []
        return batch

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.batch_window_s)
        await self._flush(self._take())

    async def _flush(self, batch: list) -> None:
        groups: dict[str, list] = {}
        for item in batch:
            groups.setdefault(item[1].model_dump_json(), []).append(item)
        for items in groups.values():
            await self._generate(items)

    async def _generate(self, items: list) -> None:
        started = time.perf_counter()
        try:
            outputs = await asyncio.to_thread(
                self._llm.chat, [m for m, _, _ in items], self._sampling(items[0][1])
            )
        except Exception as exc:  # surface engine failures on every waiting call
            for _, _, future in items:
                if not future.done():
                    future.set_exception(BackendError(f"vLLM generation failed: {exc}"))
            return
        latency = (time.perf_counter() - started) / max(1, len(items))
        for (_, _, future), output in zip(items, outputs, strict=True):
            if future.done():
                continue
            first = output.outputs[0]
            future.set_result(
                Completion(
                    text=first.text,
                    tokens_in=len(output.prompt_token_ids or []),
                    tokens_out=len(first.token_ids or []),
                    latency_s=latency,
                )
            )

    async def aclose(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)


VLLM = BackendKind(VLLMConfig, VLLMOfflineBackend)
