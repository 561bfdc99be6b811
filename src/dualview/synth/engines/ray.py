"""Ray Data as the engine of a synthesis run (``runner.engine: ray``, ``--engine ray``).

Only step 2 of a run (see `dualview.synth.runner`) changes: the units not yet in the
cache become a Ray Dataset, and ``map_batches`` sends each batch to a Ray task that runs the
same `dualview.synth.task.Task` (same templates, parsers, retries and replay of older
answers, via `dualview.synth.engine.UnitSolver`) against a backend built on the worker from
the job's `BackendConfig` (one endpoint, a pool of endpoints, or any other backend kind).
The driver alone appends results to the content-addressed cache, so:

* a Ray worker killed mid-batch only makes Ray rerun that batch; a result that arrives twice
  is written once (its key is already in the cache);
* a killed driver loses only the batches in flight; rerunning skips every cached unit;
* step 3 (output in input order, dropped file, stats) is the runner's own, so the output is
  byte-identical to a local run for the same answers.

Rate limits (``requests_per_minute``/``tokens_per_minute``) apply per Ray task, not to the
cluster as a whole. ``ray`` is the optional extra ``dualview[ray]``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

from dualview.data.schema import Record
from dualview.errors import ConfigError, DualviewError
from dualview.synth.backends import build_backend
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.engine import Pending, Results, RunnerConfig, UnitSolver, limits_of
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
) -> dict[str, list[str]]:
    """One Ray task: every unit of ``batch`` through the task, concurrently; returns the
    outcomes as JSON (``earlier`` holds a unit's result under an older parser, if any)."""

    async def go() -> list[Outcome]:
        try:
            return list(await asyncio.gather(*(one(i) for i in range(len(keys)))))
        finally:
            await backend.aclose()

    async def one(i: int) -> Outcome:
        unit = [Record.model_validate(r) for r in json.loads(str(batch["unit"][i]))]
        earlier_json = str(batch["earlier"][i])
        earlier = Outcome.from_json(json.loads(earlier_json)) if earlier_json else None
        return await solver.solve(unit, earlier)

    keys = [str(k) for k in batch["key"]]
    backend = build_backend(backend_config)
    solver = UnitSolver(task, backend, params, limits_of(config))
    outcomes = asyncio.run(go())
    pool = getattr(backend, "endpoints", None)
    used = json.dumps([[e.requests, e.ok, e.failed, e.trips, e.latency_sum] for e in pool or []])
    return {
        "key": keys,
        "id": [str(i) for i in batch["id"]],
        "outcome": [json.dumps(o.to_json()) for o in outcomes],
        "endpoints": [used if i == 0 else "" for i in range(len(keys))],  # once per batch
    }


def _row(item: Pending) -> dict[str, str]:
    """A pending unit as a Ray Dataset row (JSON columns)."""
    return {
        "key": item.key,
        "id": item.unit[0].id,
        "unit": json.dumps([r.to_json_dict() for r in item.unit]),
        "earlier": json.dumps(item.earlier.to_json()) if item.earlier else "",
    }


class RayEngine:
    """Answers the pending units with Ray Data ``map_batches`` (see module docstring)."""

    label = " (ray)"

    def __init__(self, backend: BackendConfig, config: RunnerConfig) -> None:
        self.ray = import_ray()
        self.backend_config = backend
        self.backend = build_backend(backend)  # on the driver: identity, endpoint counters
        self.config = config

    async def answer(
        self, task: Task, params: SamplingParams, pending: Iterator[Pending], results: Results
    ) -> None:
        ray = self.ray
        join_ray(ray, self.config.ray_address)
        rows = [_row(item) for item in pending]
        if not rows:
            return
        batch = max(1, min(self.config.concurrency, self.config.ray_batch_size))
        dataset = ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // batch))
        answered = dataset.map_batches(
            run_batch,
            batch_size=batch,
            batch_format="numpy",
            fn_kwargs={
                "task": task,
                "backend_config": self.backend_config,
                "params": params,
                "config": self.config,
            },
        )
        try:
            for result in answered.iter_batches(batch_size=None, batch_format="numpy"):
                self._count_endpoints(result["endpoints"])
                for key, unit_id, text in zip(
                    result["key"], result["id"], result["outcome"], strict=True
                ):
                    outcome = Outcome.from_json(json.loads(str(text)))
                    results.store(str(key), str(unit_id), outcome)
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


def _unwrap(exc: BaseException) -> BaseException:
    """The dualview error inside a Ray task failure, so the CLI prints it as one line."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DualviewError):
            return seen
        cause = getattr(seen, "cause", None)
        seen = cause if isinstance(cause, BaseException) else seen.__cause__
    return exc
