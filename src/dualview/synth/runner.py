"""Run a synthesis task over a record file: concurrent, rate-limited, resumable, sharded.

How a run goes:

1. The input is streamed once to count its units and hash them (the input digest that the
   shard merge checks); with ``--shard i/n`` the run owns the contiguous block of units
   ``[total*i//n, total*(i+1)//n)``.
2. The input is streamed again; every unit whose key is not in the cache is sent to the task,
   at most ``concurrency`` at a time (the reader waits for a free slot, so memory stays
   bounded). Results are appended to the cache as they complete, in any order.
3. Finally the input is streamed a third time and every unit's result is read from the cache in
   input order: ``ok`` records go to OUT, all other outcomes to ``OUT.dropped.jsonl`` (with
   reason and raw answers), both written atomically; ``OUT.stats.json`` sums it up.

A killed run therefore loses only the units in flight; rerunning the same command finishes the
rest, and the output is identical to an uninterrupted run. Units that failed with a transient
backend error are not cached (``error`` in the stats, ``complete: false``), so a rerun retries
them. A backend error that retrying cannot fix stops the run at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from dualview.config import StrictModel
from dualview.data.schema import Record
from dualview.errors import ConfigError
from dualview.io.atomic import AtomicJsonlWriter, atomic_write_text
from dualview.lock import exclusive
from dualview.progress import make_progress
from dualview.synth.backends.base import (
    BackendConfig,
    ChatBackend,
    SamplingParams,
    TransientBackendError,
)
from dualview.synth.cache import ResultCache, job_fingerprint, unit_key
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
    # Prices in USD per million tokens, for the cost line of the stats.
    price_in_per_million: float | None = None
    price_out_per_million: float | None = None
    # "local" (asyncio in this process) or "ray" (Ray Data map_batches; dualview[ray]).
    engine: Literal["local", "ray"] = "local"
    # Ray cluster to join (e.g. "auto" or "ray://head:10001"); default: start a local one.
    ray_address: str | None = None
    # Units per Ray task (each task runs its batch concurrently); with backend vllm, the
    # processor's batch size.
    ray_batch_size: int = Field(default=64, ge=1)
    # Backend vllm on Ray (Ray Data LLM's vLLM processor, see ray_vllm.py): units whose
    # prompts go out together in rounds, vLLM engines (one per GPU, or per tensor-parallel
    # group), and extra vLLM engine arguments (e.g. tensor_parallel_size).
    ray_vllm_window: int = Field(default=4096, ge=1)
    ray_vllm_replicas: int = Field(default=1, ge=1)
    ray_vllm_engine_kwargs: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Shard:
    """The i-th of n contiguous blocks of the input units."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str | None) -> Shard:
        if not text:
            return cls()
        head, sep, tail = text.partition("/")
        try:
            index, count = int(head), int(tail)
        except ValueError:
            index, count = -1, 0
        if not sep or count < 1 or not 0 <= index < count:
            raise ConfigError(f"shard {text!r}: expected i/n with 0 <= i < n, e.g. 0/4")
        return cls(index, count)

    def bounds(self, total: int) -> tuple[int, int]:
        return total * self.index // self.count, total * (self.index + 1) // self.count


def side_path(out: Path, suffix: str) -> Path:
    """``OUT.<suffix>``: the dropped file, the stats, the default cache."""
    return out.with_name(f"{out.name}.{suffix}")


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) with linear interpolation; None for no values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


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


class Runner:
    """One run of ``task`` over the units of an input (see module docstring)."""

    def __init__(
        self,
        task: Task,
        backend: ChatBackend,
        params: SamplingParams,
        config: RunnerConfig,
    ) -> None:
        self.task = task
        self.backend = backend
        self.params = params
        self.config = config
        self.shard = Shard.parse(config.shard)
        self.limits = Limits(config.requests_per_minute, config.tokens_per_minute)
        self.turnstile: Turnstile | None = None  # one per event loop, set by _execute
        self.fingerprint = self._job_fingerprint(task.fingerprint())
        # Jobs whose prompts were the same but whose answers an older parser judged.
        earlier = getattr(task, "earlier_fingerprints", lambda: [])()
        self.replay_fingerprints = [self._job_fingerprint(parts) for parts in earlier]

    def _job_fingerprint(self, task_parts: dict[str, Any]) -> str:
        return job_fingerprint(
            {
                "task": self.task.name,
                **task_parts,
                "model": self.backend.identity,
                "sampling": self.params.model_dump(mode="json"),
            }
        )

    def run(self, units: UnitSource, out: str | Path, input_label: str = "") -> dict[str, Any]:
        """Synchronous entry point; returns the stats (also written to ``OUT.stats.json``)."""
        return asyncio.run(self.arun(units, Path(out), input_label))

    async def arun(self, units: UnitSource, out: Path, input_label: str = "") -> dict[str, Any]:
        started = time.perf_counter()
        total, digest = _scan_input(units(), self.fingerprint)
        lo, hi = self.shard.bounds(total)
        cache_path = Path(self.config.cache or side_path(out, "cache.jsonl"))
        errors: dict[str, Outcome] = {}
        tally = Tally()
        # One writer per cache (and so per output): a second run on it stops with exit 2.
        with exclusive(cache_path.with_name(cache_path.name + ".lock"), "synthesis cache"):
            cache = ResultCache(cache_path)
            try:
                await self._execute(units, lo, hi, cache, errors, tally)
                cache.reopen()
                stats = self._assemble(units, lo, hi, cache, errors, out)
            finally:
                cache.close()
                await self.backend.aclose()
        stats.update(
            task=self.task.name,
            model=self.backend.identity,
            input=input_label,
            input_units=total,
            input_digest=digest,
            job_fingerprint=self.fingerprint,
            task_fingerprint=self.task.fingerprint(),  # template sha256, settings, parser
            sampling=self.params.model_dump(mode="json"),
            shard=[self.shard.index, self.shard.count],
            range=[lo, hi],
            wall_s=round(time.perf_counter() - started, 3),
            this_run_units=tally.fresh,
        )
        if hasattr(self.backend, "endpoint_stats"):
            stats["endpoints"] = self.backend.endpoint_stats()
        write_json(side_path(out, "stats.json"), stats)
        return stats

    async def _execute(
        self,
        units: UnitSource,
        lo: int,
        hi: int,
        cache: ResultCache,
        errors: dict[str, Outcome],
        tally: Tally,
    ) -> None:
        slots = asyncio.Semaphore(self.config.concurrency)
        self.turnstile = Turnstile()
        inflight: dict[str, asyncio.Task] = {}
        fatal: list[BaseException] = []

        with make_progress() as progress:
            bar = progress.add_task(f"{self.task.name}", total=hi - lo, status="")

            def done(status: str, fresh: bool) -> None:
                tally.add(status, fresh)
                progress.update(bar, advance=1, status=tally.text())

            async def work(key: str, unit: list[Record]) -> None:
                try:
                    outcome = await self._one(unit, self._earlier_outcome(cache, unit))
                    self._store(key, unit[0].id, outcome, cache, errors, tally)
                    progress.update(bar, advance=1, status=tally.text())
                except BaseException as exc:  # a fatal backend error or cancellation
                    fatal.append(exc)
                finally:
                    slots.release()
                    inflight.pop(key, None)

            for key, unit in self._keyed(units, lo, hi):
                if fatal:
                    break
                if key in cache:
                    done(cache.status(key), False)
                    continue
                if key in inflight:  # the same unit twice: its result serves both
                    await inflight[key]
                    done(cache.status(key) if key in cache else "error", False)
                    continue
                await slots.acquire()
                if fatal:
                    slots.release()
                    break
                inflight[key] = asyncio.create_task(work(key, unit))
            if fatal:
                for pending in list(inflight.values()):
                    pending.cancel()
            await asyncio.gather(*list(inflight.values()), return_exceptions=True)
        real = [e for e in fatal if not isinstance(e, asyncio.CancelledError)]
        if real:
            raise real[0]

    @staticmethod
    def _store(
        key: str,
        unit_id: str,
        outcome: Outcome,
        cache: ResultCache,
        errors: dict[str, Outcome],
        tally: Tally,
    ) -> None:
        """Keep a fresh outcome: cached, or an ``error`` held apart (not cached, so a rerun
        retries it); counted in ``tally``."""
        if outcome.status == "error":
            errors[key] = outcome
        else:
            errors.pop(key, None)
            cache.put(key, unit_id, outcome)
        tally.add(outcome.status, True)

    def _keyed(self, units: UnitSource, lo: int, hi: int) -> Iterator[tuple[str, list[Record]]]:
        """The units at positions ``[lo, hi)`` of the input, each with its cache key."""
        for unit in islice(units(), lo, hi):
            yield unit_key(self.fingerprint, unit), unit

    def _earlier_outcome(self, cache: ResultCache, unit: list[Record]) -> Outcome | None:
        """The unit's cached result under an older parser of this task, if any."""
        if not cache.found_on_open:  # a fresh cache holds no earlier answers
            return None
        for fingerprint in self.replay_fingerprints:
            earlier = cache.peek(unit_key(fingerprint, unit))
            if earlier is not None:
                return earlier
        return None

    async def _one(self, unit: list[Record], earlier: Outcome | None = None) -> Outcome:
        """Run the task on one unit; transient failures become an ``error`` outcome, anything
        else (a backend that cannot work, a broken template) propagates and stops the run.

        With ``earlier`` (the unit's result under an older parser), its raw answers are
        replayed to the task in order, so only prompts beyond them reach the backend; the
        usage of the replayed calls is carried over.
        """
        replay = earlier.raw if earlier is not None else None
        limits = self.limits if self.limits.active else None
        llm = LLM(self.backend, self.params, limits, replay, self.turnstile)
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

    def _assemble(
        self,
        units: UnitSource,
        lo: int,
        hi: int,
        cache: ResultCache,
        errors: dict[str, Outcome],
        out: Path,
    ) -> dict[str, Any]:
        outcomes: Counter[str] = Counter()
        counts: Counter[str] = Counter()
        latencies: list[float] = []
        tokens_in = tokens_out = 0
        with (
            AtomicJsonlWriter(out) as kept,
            AtomicJsonlWriter(side_path(out, "dropped.jsonl")) as dropped,
        ):
            for key, unit in self._keyed(units, lo, hi):
                outcome = cache.get(key) if key in cache else errors[key]
                outcomes[outcome.status] += 1
                counts.update(outcome.counts)
                latencies.extend(outcome.latencies)
                tokens_in += outcome.tokens_in
                tokens_out += outcome.tokens_out
                for record in outcome.records if outcome.status == "ok" else []:
                    kept.write(record)
                if outcome.status != "ok":
                    dropped.write(_dropped_line(unit, outcome))
        return {
            "units": hi - lo,
            "complete": outcomes["error"] == 0,
            "outcomes": {s: outcomes[s] for s in STATUSES},
            "records_out": kept.count,
            "dropped": dropped.count,
            "llm_calls": len(latencies),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "latency_s": {
                "p50": percentile(latencies, 0.5),
                "p95": percentile(latencies, 0.95),
                "mean": statistics.fmean(latencies) if latencies else None,
            },
            "cost_usd": self._cost(tokens_in, tokens_out),
            "counts": dict(counts),
            "summary": self.task.summary(dict(counts)),
        }

    def _cost(self, tokens_in: int, tokens_out: int) -> float | None:
        price_in, price_out = self.config.price_in_per_million, self.config.price_out_per_million
        if price_in is None and price_out is None:
            return None
        return round((tokens_in * (price_in or 0) + tokens_out * (price_out or 0)) / 1e6, 6)


def make_runner(
    task: Task, backend: BackendConfig, params: SamplingParams, config: RunnerConfig
) -> Runner:
    """The runner that ``config.engine`` names: this process (local) or Ray Data (ray)."""
    if config.engine == "ray" and backend.kind == "vllm":
        from dualview.synth.ray_vllm import RayVLLMRunner

        return RayVLLMRunner(task, backend, params, config)
    if config.engine == "ray":
        from dualview.synth.ray_engine import RayRunner

        return RayRunner(task, backend, params, config)
    from dualview.synth.backends import build_backend

    return Runner(task, build_backend(backend), params, config)


def _scan_input(units: Iterator[list[Record]], fingerprint: str) -> tuple[int, str]:
    """Number of units and a digest of their keys in order (what the shard merge compares)."""
    digest = hashlib.sha256()
    total = 0
    for unit in units:
        digest.update(unit_key(fingerprint, unit).encode())
        total += 1
    return total, digest.hexdigest()


def _dropped_line(unit: list[Record], outcome: Outcome) -> dict[str, Any]:
    return {
        "id": unit[0].id,
        "unit_ids": [r.id for r in unit],
        "status": outcome.status,
        "reason": outcome.reason,
        "raw": outcome.raw,
    }


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")
