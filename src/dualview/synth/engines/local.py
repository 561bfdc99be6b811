"""The local engine (``runner.engine: local``, the default): asyncio in this process.

Every pending unit becomes an asyncio task, at most ``concurrency`` at a time: the reader of
the input waits for a free slot, so memory stays flat however long the input. Answers pass a
`Turnstile` one per loop iteration, so the requests they free slots for go out while the
rest are still being handled. A backend error that retrying cannot fix cancels the units in
flight and stops the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from dualview.synth.backends import build_backend
from dualview.synth.backends.base import BackendConfig, ChatBackend, SamplingParams
from dualview.synth.engine import Pending, Results, RunnerConfig, UnitSolver, limits_of
from dualview.synth.task import Task, Turnstile


class LocalEngine:
    """Answers the pending units concurrently against one backend in this process."""

    label = ""

    def __init__(
        self, backend: BackendConfig, config: RunnerConfig, *, chat: ChatBackend | None = None
    ) -> None:
        """``chat``: a backend already built (a stub, a test double), used instead of
        building one from ``backend``."""
        self.backend = chat if chat is not None else build_backend(backend)
        self.config = config
        self.limits = limits_of(config)  # one pacer for the whole run

    async def answer(
        self, task: Task, params: SamplingParams, pending: Iterator[Pending], results: Results
    ) -> None:
        solver = UnitSolver(task, self.backend, params, self.limits, Turnstile())
        slots = asyncio.Semaphore(self.config.concurrency)
        inflight: set[asyncio.Task] = set()
        fatal: list[BaseException] = []

        async def work(item: Pending) -> None:
            try:
                outcome = await solver.solve(item.unit, item.earlier)
                results.store(item.key, item.unit[0].id, outcome)
            except BaseException as exc:  # a fatal backend error or cancellation
                fatal.append(exc)
            finally:
                slots.release()

        for item in pending:
            if fatal:
                break
            await slots.acquire()
            if fatal:
                slots.release()
                break
            run = asyncio.create_task(work(item))
            inflight.add(run)
            run.add_done_callback(inflight.discard)
        if fatal:
            for run in list(inflight):
                run.cancel()
        await asyncio.gather(*list(inflight), return_exceptions=True)
        real = [e for e in fatal if not isinstance(e, asyncio.CancelledError)]
        if real:
            raise real[0]
