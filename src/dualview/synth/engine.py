"""What a synthesis engine is: the part of a run that answers the units the cache lacks.

A run (`dualview.synth.runner.Runner`) has three steps: count and hash the input, answer
every unit not yet in the cache, write the output in input order from the cache. Only the
second step differs between engines (this process, Ray Data tasks, Ray Data LLM's vLLM
processor), so an engine is one object with one coroutine:

    engine.answer(task, params, pending, results)

* ``pending`` (`pending_units`) is the one loop over the input that every engine consumes: a
  unit already in the cache is counted and skipped, a unit that comes again is handed out
  once (its first answer serves every copy), and each unit comes with its result under an
  older parser of the task, if any (its raw answers are replayed, see `UnitSolver`).
* ``results`` (`Results`) is where an engine puts each fresh outcome: cached, or held apart
  as an ``error`` (not cached, so a rerun retries it), counted for the progress bar.
* `UnitSolver` runs the task on one unit against a `ChatBackend`: what every engine does per
  unit, on the driver or on a worker.

Every engine is built the same way, ``Engine(backend_config, runner_config)``, and names its
driver-side ``backend`` (whose identity keys the cache, whose endpoint counters go into the
stats, and which the run closes at the end). Engines are chosen by name from the registry in
`dualview.synth.engines`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import Field

from dualview.config import StrictModel
from dualview.data.schema import Record
from dualview.synth.backends.base import (
    BackendConfig,
    ChatBackend,
    SamplingParams,
    TransientBackendError,
)
from dualview.synth.cache import ResultCache
from dualview.synth.limits import Limits
from dualview.synth.task import LLM, STATUSES, Outcome, Task, Turnstile

UnitSource = Callable[[], Iterator[list[Record]]]


class RunnerConfig(StrictModel):
    """How a task is executed; none of this changes the results (not in the cache key)."""

    concurrency: int = Field(default=4, ge=1)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    # Cache file; default OUT.cache.jsonl. Point several runs at one file to share results.
    cache: Path | None = None
    # "i/n": run only the i-th of n contiguous blocks of the input (0-based).
    shard: str | None = None
    # The job fails (exit 1, after writing its files) when units end in backend errors and
    # none succeeds, or when their share of the units is above this.
    max_error_share: float = Field(default=1.0, ge=0.0, le=1.0)
    # Prices in USD per million tokens, for the cost line of the stats.
    price_in_per_million: float | None = None
    price_out_per_million: float | None = None
    # A name in the engine registry (dualview.synth.engines): "local" (asyncio in this
    # process) or "ray" (Ray Data map_batches; dualview[ray]; with backend vllm, Ray Data
    # LLM's vLLM processor). Checked when the engine is built.
    engine: str = "local"
    # Ray cluster to join (e.g. "auto" or "ray://head:10001"); default: start a local one.
    ray_address: str | None = None
    # Units per Ray task (each task runs its batch concurrently); with backend vllm, the
    # processor's batch size.
    ray_batch_size: int = Field(default=64, ge=1)
    # Backend vllm on Ray (Ray Data LLM's vLLM processor, see engines/ray_vllm.py): units
    # whose prompts go out together in rounds, vLLM engines (one per GPU, or per
    # tensor-parallel group), and extra vLLM engine arguments (e.g. tensor_parallel_size).
    ray_vllm_window: int = Field(default=4096, ge=1)
    ray_vllm_replicas: int = Field(default=1, ge=1)
    ray_vllm_engine_kwargs: dict[str, Any] = Field(default_factory=dict)


def limits_of(config: RunnerConfig) -> Limits | None:
    """The rate limits of ``config`` (one pacer per call: per run, or per Ray task); None
    when no limit is set."""
    limits = Limits(config.requests_per_minute, config.tokens_per_minute)
    return limits if limits.active else None


class Tally:
    """Live counts for the progress bar."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.started = time.perf_counter()
        self.fresh = 0

    def add(self, status: str, fresh: bool) -> None:
        """Count one unit: its outcome ``status``, and whether this run computed it."""
        self.counts[status] += 1
        self.fresh += int(fresh)

    def text(self) -> str:
        rate = self.fresh / max(1e-9, time.perf_counter() - self.started)
        parts = [f"{s} {self.counts[s]}" for s in STATUSES if self.counts[s] or s != "skipped"]
        return " · ".join(parts) + f" · {rate:.2f} units/s"


@dataclass(frozen=True)
class Pending:
    """A unit to answer: its cache key, its records, and its result under an older parser
    of the task (None if there is none)."""

    key: str
    unit: list[Record]
    earlier: Outcome | None = None


class Results:
    """Where the outcomes of a run go: the cache, ``error`` outcomes held apart, the tally."""

    def __init__(
        self, cache: ResultCache, tally: Tally, on_change: Callable[[], None] = lambda: None
    ) -> None:
        self.cache = cache
        self.tally = tally
        self.errors: dict[str, Outcome] = {}
        self.repeats: list[str] = []  # keys of units that came again while being answered
        self.on_change = on_change

    def store(self, key: str, unit_id: str, outcome: Outcome) -> None:
        """Keep a fresh outcome: cached, or an ``error`` held apart (not cached, so a rerun
        retries it). An outcome for a key already cached (a Ray batch run twice) is dropped:
        the first one stays."""
        if key in self.cache:
            return
        if outcome.status == "error":
            self.errors[key] = outcome
        else:
            self.errors.pop(key, None)
            self.cache.put(key, unit_id, outcome)
        self.tally.add(outcome.status, True)
        self.on_change()

    def skip(self, key: str) -> None:
        """Count a unit whose result the cache already holds."""
        self.tally.add(self.cache.status(key), False)
        self.on_change()

    def count_repeats(self) -> None:
        """Count the repeated units, once their first copies are answered."""
        for key in self.repeats:
            self.tally.add(self.cache.status(key) if key in self.cache else "error", False)
        self.repeats = []
        self.on_change()


def pending_units(
    keyed: Iterable[tuple[str, list[Record]]],
    results: Results,
    earlier: Callable[[list[Record]], Outcome | None],
) -> Iterator[Pending]:
    """The units of ``keyed`` still to answer, each once (the loop every engine runs).

    A unit in the cache is counted and skipped. A unit whose key came before in this pass is
    not handed out again: its first copy's answer serves it (counted by
    `Results.count_repeats`). ``earlier(unit)`` gives the unit's result under an older
    parser, replayed by `UnitSolver.solve`.
    """
    handed_out: set[str] = set()
    for key, unit in keyed:
        if key in results.cache:
            results.skip(key)
        elif key in handed_out:
            results.repeats.append(key)
        else:
            handed_out.add(key)
            yield Pending(key, unit, earlier(unit))


class UnitSolver:
    """Runs a task on one unit against a backend (what every engine does per unit)."""

    def __init__(
        self,
        task: Task,
        backend: ChatBackend,
        params: SamplingParams,
        limits: Limits | None = None,
        turnstile: Turnstile | None = None,
    ) -> None:
        self.task = task
        self.backend = backend
        self.params = params
        self.limits = limits
        self.turnstile = turnstile

    async def solve(self, unit: list[Record], earlier: Outcome | None = None) -> Outcome:
        """The unit's outcome; transient failures become an ``error`` outcome, anything else
        (a backend that cannot work, a broken template) propagates and stops the run.

        With ``earlier`` (the unit's result under an older parser), its raw answers are
        replayed to the task in order, so only prompts beyond them reach the backend; the
        usage of the replayed calls is carried over.
        """
        replay = earlier.raw if earlier is not None else None
        llm = LLM(self.backend, self.params, self.limits, replay, self.turnstile)
        try:
            outcome = await self.task.run(unit, llm)
        except TransientBackendError as exc:
            outcome = Outcome("error", reason=str(exc))
        outcome = llm.stamp(outcome)
        if earlier is not None and llm.replayed:
            used = llm.replayed
            outcome.tokens_in += earlier.tokens_in
            outcome.tokens_out += earlier.tokens_out
            outcome.latencies = earlier.latencies[:used] + outcome.latencies
            outcome.counts = {**outcome.counts, "replayed_answers": used}
        return outcome


@runtime_checkable
class Engine(Protocol):
    """Step 2 of a run: answers the units the cache lacks (see module docstring).

    Built as ``Engine(backend_config, runner_config)`` (an `EngineFactory`)."""

    # Shown after the task's name on the progress bar ("" for none).
    label: str
    # On the driver: its ``identity`` keys the cache, ``endpoint_stats()`` (if any) goes into
    # the stats, and the run closes it when done.
    backend: ChatBackend

    async def answer(
        self,
        task: Task,
        params: SamplingParams,
        pending: Iterator[Pending],
        results: Results,
    ) -> None:
        """Answer every unit of ``pending`` and put each outcome into ``results``."""
        ...


class EngineFactory(Protocol):
    """How the registry builds an engine: every engine class has this signature (keyword
    arguments after the two are an engine's own, e.g. a test double for its executor)."""

    def __call__(self, backend: BackendConfig, config: RunnerConfig, /, **hooks: Any) -> Engine: ...
