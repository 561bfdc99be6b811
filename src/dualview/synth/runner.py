"""Run a synthesis task over a record file: concurrent, rate-limited, resumable, sharded.

How a run goes:

1. The input is streamed once to count its units and hash them (the input digest that the
   shard merge checks); with ``--shard i/n`` the run owns the contiguous block of units
   ``[total*i//n, total*(i+1)//n)``.
2. The input is streamed again (`dualview.synth.engine.pending_units`): units already in the
   cache are skipped, a repeated unit is answered once, and the engine
   (`dualview.synth.engine.Engine`, chosen by ``runner.engine`` from `dualview.synth.engines`)
   answers the rest: locally at most ``concurrency`` at a time (the reader waits for a free
   slot, so memory stays bounded), or on Ray. Results are appended to the cache as they
   complete, in any order.
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
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from dualview.data.schema import Record
from dualview.errors import ConfigError, DualviewError
from dualview.io.atomic import AtomicJsonlWriter, atomic_write_text
from dualview.lock import exclusive
from dualview.progress import make_progress
from dualview.synth.backends.base import BackendConfig, ChatBackend, SamplingParams
from dualview.synth.cache import ResultCache, job_fingerprint, unit_key
from dualview.synth.engine import (
    Engine,
    Results,
    RunnerConfig,
    Tally,
    UnitSource,
    pending_units,
)
from dualview.synth.engines import build_engine, engine_over
from dualview.synth.job_stats import JobStats
from dualview.synth.task import STATUSES, Outcome, Task

__all__ = [
    "JobFailed",
    "Runner",
    "RunnerConfig",
    "Shard",
    "Tally",
    "UnitSource",
    "check_failures",
    "job_outputs",
    "make_runner",
    "result_files",
    "side_path",
]


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


def cache_path(out: Path, config: RunnerConfig) -> Path:
    """The run's cache: ``runner.cache``, else ``OUT.cache.jsonl``."""
    return Path(config.cache or side_path(out, "cache.jsonl"))


def result_files(out: Path) -> list[Path]:
    """The files of a run's result: OUT, ``OUT.dropped.jsonl``, ``OUT.stats.json``."""
    return [out, side_path(out, "dropped.jsonl"), side_path(out, "stats.json")]


def job_outputs(out: Path, config: RunnerConfig) -> list[Path]:
    """Every file a run into ``out`` writes: its `result_files`, the cache and its lock
    (what must not be one of the run's inputs)."""
    cache = cache_path(out, config)
    return [*result_files(out), cache, _lock_path(cache)]


def _lock_path(cache: Path) -> Path:
    """The lock that makes one run the only writer of ``cache``."""
    return cache.with_name(cache.name + ".lock")


class JobFailed(DualviewError):
    """Too many units of a run ended in backend errors; its files are written (exit 1)."""

    exit_code = 1


def check_failures(stats: JobStats, out: Path, max_error_share: float) -> None:
    """Raise `JobFailed` when units ended in backend errors and none was answered, or when
    their share of the run's units is above ``max_error_share``; the message says where the
    errors are (``OUT.dropped.jsonl``, ``OUT.stats.json``)."""
    errors, units = stats.outcomes.error, stats.units
    if not errors:
        return
    if not stats.outcomes.answered():
        why = "no unit was answered"
    elif errors > max_error_share * units:
        why = f"more than runner.max_error_share {max_error_share:g}"
    else:
        return
    first = stats.first_error
    raise JobFailed(
        f"{out}: {errors} of {units} unit(s) failed with backend errors ({why})"
        + (f", e.g. {first[:200]}" if first else "")
        + f"; reasons in {side_path(out, 'dropped.jsonl')}, counts in "
        f"{side_path(out, 'stats.json')}; rerun to retry them"
    )


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) with linear interpolation; None for no values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


class Runner:
    """One run of ``task`` over the units of an input (see module docstring); step 2 is the
    ``engine``'s (`dualview.synth.engine.Engine`). Given a `ChatBackend` instead of an engine,
    the run uses the local engine over it."""

    def __init__(
        self,
        task: Task,
        engine: Engine | ChatBackend,
        params: SamplingParams,
        config: RunnerConfig,
    ) -> None:
        self.task = task
        self.engine = engine if isinstance(engine, Engine) else engine_over(engine, config)
        self.backend = self.engine.backend
        self.params = params
        self.config = config
        self.shard = Shard.parse(config.shard)
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

    def run(self, units: UnitSource, out: str | Path, input_label: str = "") -> JobStats:
        """Synchronous entry point; returns the stats (also written to ``OUT.stats.json``)."""
        return asyncio.run(self.arun(units, Path(out), input_label))

    async def arun(self, units: UnitSource, out: Path, input_label: str = "") -> JobStats:
        started = time.perf_counter()
        total, digest = _scan_input(units(), self.fingerprint)
        lo, hi = self.shard.bounds(total)
        cache_file = cache_path(out, self.config)
        tally = Tally()
        # One writer per cache (and so per output): a second run on it stops with exit 2.
        with exclusive(_lock_path(cache_file), "synthesis cache"):
            cache = ResultCache(cache_file)
            try:
                errors = await self._execute(units, lo, hi, cache, tally)
                cache.reopen()
                totals = self._assemble(units, lo, hi, cache, errors, out)
            finally:
                cache.close()
                await self.backend.aclose()
        endpoint_stats = getattr(self.backend, "endpoint_stats", None)
        stats = JobStats(
            **totals,
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
            **({"endpoints": endpoint_stats()} if endpoint_stats else {}),
        )
        write_json(side_path(out, "stats.json"), stats.to_json())
        return stats

    async def _execute(
        self, units: UnitSource, lo: int, hi: int, cache: ResultCache, tally: Tally
    ) -> dict[str, Outcome]:
        """Step 2: the engine answers the units of ``[lo, hi)`` the cache lacks; returns the
        ``error`` outcomes (not cached)."""
        with make_progress() as progress:
            label = f"{self.task.name}{self.engine.label}"
            bar = progress.add_task(label, total=hi - lo, status="")

            def show() -> None:
                progress.update(bar, completed=sum(tally.counts.values()), status=tally.text())

            results = Results(cache, tally, show)
            earlier = partial(self._earlier_outcome, cache)
            pending = pending_units(self._keyed(units, lo, hi), results, earlier)
            await self.engine.answer(self.task, self.params, pending, results)
            results.count_repeats()
        return results.errors

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

    def _assemble(
        self,
        units: UnitSource,
        lo: int,
        hi: int,
        cache: ResultCache,
        errors: dict[str, Outcome],
        out: Path,
    ) -> dict[str, Any]:
        """Step 3: OUT and ``OUT.dropped.jsonl`` from the cache; returns the run's totals
        (`JobStats` fields)."""
        outcomes: Counter[str] = Counter()
        counts: Counter[str] = Counter()
        rejections: Counter[str] = Counter()
        latencies: list[float] = []
        tokens_in = tokens_out = 0
        first_error: str | None = None
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
                if outcome.status == "rejected":
                    rejections[reason_code(outcome.reason)] += 1
                if outcome.status == "error" and first_error is None:
                    first_error = str(outcome.reason or "")
        return {
            "units": hi - lo,
            "complete": outcomes["error"] == 0,
            "outcomes": {s: outcomes[s] for s in STATUSES},
            "records_out": kept.count,
            "dropped": dropped.count,
            "rejections": dict(rejections.most_common()),
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
            "first_error": first_error,
        }

    def _cost(self, tokens_in: int, tokens_out: int) -> float | None:
        price_in, price_out = self.config.price_in_per_million, self.config.price_out_per_million
        if price_in is None and price_out is None:
            return None
        return round((tokens_in * (price_in or 0) + tokens_out * (price_out or 0)) / 1e6, 6)


def reason_code(reason: object) -> str:
    """The code of a rejection reason (``"same_as_original: ratio 0.93"`` ->
    ``"same_as_original"``): what stats and reports count."""
    return str(reason or "").split(":")[0]


def make_runner(
    task: Task, backend: BackendConfig, params: SamplingParams, config: RunnerConfig
) -> Runner:
    """The runner whose engine ``config.engine`` names (see `dualview.synth.engines`)."""
    return Runner(task, build_engine(backend, config), params, config)


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
