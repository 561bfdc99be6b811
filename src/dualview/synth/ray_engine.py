"""Ray Data as another executor of a synthesis run (``runner.engine: ray``, ``--engine ray``).

Only step 2 of a run (see `dualview.synth.runner`) changes: the units not yet in the
cache become a Ray Dataset, and ``map_batches`` sends each batch to a Ray task that runs the
same `dualview.synth.task.Task` (same templates, parsers, retries and replay of older
answers, via `Runner._one`) against a backend built on the worker from the job's
`BackendConfig` (one endpoint, a pool of endpoints, or any other backend kind). The
driver alone appends results to the content-addressed cache, so:

* a Ray worker killed mid-batch only makes Ray rerun that batch; a result that arrives twice
  is written once (its key is already in the cache);
* a killed driver loses only the batches in flight; rerunning skips every cached unit;
* step 3 (output in input order, dropped file, stats) is the local runner's own, so the
  output is byte-identical to a local run for the same answers.

Rate limits (``requests_per_minute``/``tokens_per_minute``) apply per Ray task, not to the
cluster as a whole. ``ray`` is the optional extra ``dualview[ray]``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from dualview.data.schema import Record
from dualview.errors import ConfigError, DualviewError
from dualview.progress import make_progress
from dualview.synth.backends import build_backend
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.cache import ResultCache
from dualview.synth.runner import Runner, RunnerConfig, Tally, UnitSource
from dualview.synth.task import Outcome, Task


def import_ray() -> Any:
    """The ``ray`` module, or a clear error naming the extra to install."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise ConfigError(
            "engine ray needs Ray Data: pip install 'dualview[ray]' (or 'ray[data]')"
        ) from None
    return ray


def join_ray(ray: Any, address: str | None) -> None:
    """Join the cluster at ``address`` (None: start a local one), once per process."""
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)


def run_batch(
    batch: dict[str, Any],
    task: Task,
    backend_config: BackendConfig,
    params: SamplingParams,
    config: RunnerConfig,
    replay: bool,
) -> dict[str, list[str]]:
    """One Ray task: every unit of ``batch`` through the task, concurrently; returns the
    outcomes as JSON (``earlier`` holds a unit's result under an older parser, if any)."""

    async def go() -> list[Outcome]:
        try:
            return list(await asyncio.gather(*(one(runner, i) for i in range(len(keys)))))
        finally:
            await runner.backend.aclose()

    async def one(runner: Runner, i: int) -> Outcome:
        unit = [Record.model_validate(r) for r in json.loads(str(batch["unit"][i]))]
        earlier_json = str(batch["earlier"][i]) if replay else ""
        earlier = Outcome.from_json(json.loads(earlier_json)) if earlier_json else None
        return await runner._one(unit, earlier)

    keys = [str(k) for k in batch["key"]]
    runner = Runner(task, build_backend(backend_config), params, config)
    outcomes = asyncio.run(go())
    pool = getattr(runner.backend, "endpoints", None)
    used = json.dumps([[e.requests, e.ok, e.failed, e.trips, e.latency_sum] for e in pool or []])
    return {
        "key": keys,
        "id": [str(i) for i in batch["id"]],
        "outcome": [json.dumps(o.to_json()) for o in outcomes],
        "endpoints": [used if i == 0 else "" for i in range(len(keys))],  # once per batch
    }


class RayRunner(Runner):
    """A `Runner` whose uncached units are answered by Ray Data ``map_batches``."""

    def __init__(
        self,
        task: Task,
        backend_config: BackendConfig,
        params: SamplingParams,
        config: RunnerConfig,
    ) -> None:
        self.ray = import_ray()
        super().__init__(task, build_backend(backend_config), params, config)
        self.backend_config = backend_config

    def _pending(
        self, units: UnitSource, lo: int, hi: int, cache: ResultCache, tally: Tally
    ) -> list[dict[str, str]]:
        rows: dict[str, dict[str, str]] = {}
        for key, unit in self._keyed(units, lo, hi):
            if key in cache:
                tally.add(cache.status(key), False)
                continue
            if key not in rows:  # the same unit twice: its result serves both
                earlier = self._earlier_outcome(cache, unit)
                rows[key] = {
                    "key": key,
                    "id": unit[0].id,
                    "unit": json.dumps([r.to_json_dict() for r in unit]),
                    "earlier": json.dumps(earlier.to_json()) if earlier else "",
                }
        return list(rows.values())

    async def _execute(
        self,
        units: UnitSource,
        lo: int,
        hi: int,
        cache: ResultCache,
        errors: dict[str, Outcome],
        tally: Tally,
    ) -> None:
        ray = self.ray
        join_ray(ray, self.config.ray_address)
        rows = self._pending(units, lo, hi, cache, tally)
        if not rows:
            return
        batch = max(1, min(self.config.concurrency, self.config.ray_batch_size))
        dataset = ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // batch))
        answered = dataset.map_batches(
            run_batch,
            batch_size=batch,
            batch_format="numpy",
            fn_kwargs={
                "task": self.task,
                "backend_config": self.backend_config,
                "params": self.params,
                "config": self.config,
                "replay": bool(self.replay_fingerprints),
            },
        )
        with make_progress() as progress:
            bar = progress.add_task(f"{self.task.name} (ray)", total=len(rows), status="")
            try:
                for result in answered.iter_batches(batch_size=None, batch_format="numpy"):
                    self._count_endpoints(result["endpoints"])
                    for key, unit_id, text in zip(
                        result["key"], result["id"], result["outcome"], strict=True
                    ):
                        self._record(str(key), str(unit_id), str(text), cache, errors, tally)
                        progress.update(bar, advance=1, status=tally.text())
            except Exception as exc:
                raise _unwrap(exc) from None

    def _count_endpoints(self, column: Any) -> None:
        """Add the per-endpoint counters of Ray tasks to the driver's pool, for the stats."""
        pool = getattr(self.backend, "endpoints", None)
        for text in column:
            for endpoint, used in zip(pool or [], json.loads(str(text) or "[]"), strict=False):
                endpoint.requests += used[0]
                endpoint.ok += used[1]
                endpoint.failed += used[2]
                endpoint.trips += used[3]
                endpoint.latency_sum += used[4]

    def _record(
        self,
        key: str,
        unit_id: str,
        text: str,
        cache: ResultCache,
        errors: dict[str, Outcome],
        tally: Tally,
    ) -> None:
        if key in cache:  # a retried batch answered it again: keep the first
            return
        self._store(key, unit_id, Outcome.from_json(json.loads(text)), cache, errors, tally)


def _unwrap(exc: BaseException) -> BaseException:
    """The dualview error inside a Ray task failure, so the CLI prints it as one line."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DualviewError):
            return seen
        cause = getattr(seen, "cause", None)
        seen = cause if isinstance(cause, BaseException) else seen.__cause__
    return exc
