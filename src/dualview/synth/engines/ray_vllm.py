"""Ray Data LLM's vLLM processor as the engine of a synthesis run (``engine: ray`` with
``backend.kind: vllm``).

A task run asks the LLM one prompt at a time, and some ask again: a retry after an answer
that does not parse, or a second question that depends on the first answer. A processor, on
the other hand, maps one Dataset of prompts to one Dataset of answers. This engine connects
the two in rounds:

1. The task of every uncached unit of a window (``ray_vllm_window`` units) starts on the
   driver against `RoundBackend`. Each `complete` call parks its request and waits.
2. Once every live task waits (or is done), the parked requests become one Ray Dataset.
   ``build_processor(vLLMEngineProcessorConfig(...))`` runs it on the cluster's GPUs, with
   ``ray_vllm_replicas`` engines and row-level sampling parameters. Answers come back by
   request index and wake their tasks.
3. A task that finishes has its outcome cached at once, exactly as in the local engine.
   Its next prompt, if any, waits for the next round.

Parsing, retries and replay of older answers (`dualview.synth.engine.UnitSolver`), the skip
of cached and repeated units (`dualview.synth.engine.pending_units`) and the output (step 3
of `dualview.synth.runner`) are shared with the other engines. So a killed job reruns only
its unfinished units. The cache key names the model as ``vllm:MODEL``, as the in-process
`vllm` backend does, so the two share a cache. ``vllm`` and ``ray[data]`` must be importable
on the GPU workers; the guarded imports say what to install when they are not.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from dualview.errors import ConfigError
from dualview.synth.backends.base import (
    BackendConfig,
    Completion,
    Message,
    SamplingParams,
)
from dualview.synth.backends.vllm_offline import import_vllm
from dualview.synth.engine import Pending, Results, RunnerConfig, UnitSolver
from dualview.synth.engines.ray import import_ray, join_ray
from dualview.synth.task import Task

# A processor: a Ray Dataset of requests (columns i, messages, sampling) to one of answers
# (columns i, text, tokens_in, tokens_out).
Processor = Callable[[Any], Any]

# Event-loop turns without any new request or finished task before a round is sent.
_SETTLED_TURNS = 3


class RoundBackend:
    """Parks every request until the engine answers a whole round (see module docstring)."""

    def __init__(self, model: str) -> None:
        self.identity = f"vllm:{model}"
        self.parked: list[tuple[list[Message], SamplingParams, asyncio.Future]] = []

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion:
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.parked.append((messages, params, future))
        return await future

    def take(self) -> list[tuple[list[Message], SamplingParams, asyncio.Future]]:
        parked, self.parked = self.parked, []
        return parked

    async def aclose(self) -> None:
        for _, _, future in self.take():
            future.cancel()


def request_row(row: dict[str, Any]) -> dict[str, Any]:
    """Processor preprocess: our request row as the vLLM stage's input."""
    sampling = json.loads(row["sampling"])
    return {
        "i": row["i"],
        "messages": json.loads(row["messages"]),
        "sampling_params": {
            "temperature": sampling["temperature"],
            "top_p": sampling["top_p"],
            "max_tokens": sampling["max_tokens"],
            "seed": sampling["seed"],
            "stop": sampling["stop"],
        },
    }


def answer_row(row: dict[str, Any]) -> dict[str, Any]:
    """Processor postprocess: the vLLM stage's output as our answer row."""
    return {
        "i": row["i"],
        "text": row.get("generated_text") or "",
        "tokens_in": int(row.get("num_input_tokens") or 0),
        "tokens_out": int(row.get("num_generated_tokens") or 0),
    }


def build_vllm_processor(backend: BackendConfig, config: RunnerConfig) -> Processor:
    """Ray Data LLM's vLLM processor for ``backend.model`` (GPU workers with ``vllm``)."""
    try:
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig
    except ImportError:
        raise ConfigError(
            "engine ray with backend vllm needs Ray Data LLM: pip install 'ray[data,llm]'"
        ) from None
    import_vllm()
    processor_config = vLLMEngineProcessorConfig(
        model_source=backend.model,
        engine_kwargs={"max_model_len": backend.n_ctx, **config.ray_vllm_engine_kwargs},
        concurrency=config.ray_vllm_replicas,
        batch_size=config.ray_batch_size,
    )
    return build_processor(processor_config, preprocess=request_row, postprocess=answer_row)


class RayVLLMEngine:
    """Answers the pending units' prompts in rounds with Ray Data LLM's vLLM processor."""

    label = " (vllm)"

    def __init__(
        self,
        backend: BackendConfig,
        config: RunnerConfig,
        *,
        processor: Processor | None = None,
    ) -> None:
        """``processor``: a stand-in for the vLLM processor (tests); default: built from
        ``backend`` and ``config``."""
        if config.requests_per_minute or config.tokens_per_minute:
            raise ConfigError(
                "rate limits apply to API endpoints; the vLLM processor runs on your own GPUs "
                "(drop requests_per_minute / tokens_per_minute)"
            )
        self.ray = import_ray()
        self.backend = RoundBackend(backend.model)
        self.config = config
        self.processor = processor or build_vllm_processor(backend, config)
        self.rounds = 0

    async def answer(
        self, task: Task, params: SamplingParams, pending: Iterator[Pending], results: Results
    ) -> None:
        join_ray(self.ray, self.config.ray_address)
        solver = UnitSolver(task, self.backend, params)
        window: list[Pending] = []
        for item in pending:
            window.append(item)
            if len(window) >= self.config.ray_vllm_window:
                await self._window(solver, window, results)
                window = []
        if window:
            await self._window(solver, window, results)

    async def _window(self, solver: UnitSolver, window: list[Pending], results: Results) -> None:
        """Run the tasks of ``window`` to the end, one round of prompts at a time."""
        runs = {asyncio.create_task(solver.solve(p.unit, p.earlier)): p for p in window}
        try:
            while runs:
                await self._settle(runs)
                finished = [r for r in runs if r.done()]
                for run in finished:
                    item = runs.pop(run)
                    results.store(item.key, item.unit[0].id, run.result())
                parked = self.backend.take()
                if parked:
                    self._answer(parked)
                elif runs and not finished:  # nothing to answer and nothing moved: a bug
                    raise RuntimeError(f"{len(runs)} task runs wait on something besides the LLM")
        finally:
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)

    async def _settle(self, runs: dict[asyncio.Task, Pending]) -> None:
        """Return when every run waits for an answer or is done."""
        quiet, seen = 0, None
        while quiet < _SETTLED_TURNS:
            await asyncio.sleep(0)
            state = (len(self.backend.parked), sum(r.done() for r in runs))
            quiet = quiet + 1 if state == seen else 0
            seen = state

    def _answer(self, parked: list[tuple[list[Message], SamplingParams, asyncio.Future]]) -> None:
        """One round: every parked request through the processor; wake each with its answer."""
        self.rounds += 1
        rows = [
            {"i": i, "messages": json.dumps(m), "sampling": params.model_dump_json()}
            for i, (m, params, _) in enumerate(parked)
        ]
        started = time.perf_counter()
        dataset = self.ray.data.from_items(rows)
        answers = {int(row["i"]): row for row in self.processor(dataset).take_all()}
        latency = (time.perf_counter() - started) / len(parked)
        for i, (_, _, future) in enumerate(parked):
            row = answers.get(i)
            if row is None:
                future.set_exception(RuntimeError(f"the vLLM processor lost request {i}"))
                continue
            future.set_result(
                Completion(str(row["text"]), int(row["tokens_in"]), int(row["tokens_out"]), latency)
            )
