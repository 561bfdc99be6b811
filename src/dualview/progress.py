"""Progress of long work, one mechanism for every command (`make_progress`, `track`).

Where the output goes decides how progress shows (`progress_mode`):

- **a terminal** (stderr is a tty): rich bars with rate, elapsed time and ETA. A loop that
  runs inside another's bars adds its bar to the same display and removes it when done
  (rich draws one live display at a time).
- **a log** (stderr is a file or a pipe: CI, ``nohup``, a job scheduler): plain lines on
  stderr, at most one per task every ``DUALVIEW_PROGRESS_INTERVAL`` seconds (default 30), as
  ``tqdm`` does with ``mininterval``, and one last line when a task that printed ends::

      documents: 3072/9000 (34%), 51.2/s, elapsed 0:01:00, ETA 0:01:56

  No carriage returns or escape codes. A task with no known total shows its count and rate.
- **quiet**: ``DUALVIEW_NO_PROGRESS=1`` (CI and the tests set it) shows nothing; so do the
  processes of a distributed job other than rank 0.

Hugging Face's own bars (downloads, ``datasets``' map and save bars) are turned off outside a
terminal by the CLI (`quiet_library_bars`), so a log holds only these lines.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from dualview.errors import DualviewError

T = TypeVar("T")
Mode = Literal["bar", "lines", "off"]

#: Seconds between two progress lines of one task in a log (``DUALVIEW_PROGRESS_INTERVAL``).
DEFAULT_INTERVAL = 30.0


def progress_mode() -> Mode:
    """``off`` with ``DUALVIEW_NO_PROGRESS`` set or in a distributed job's process other
    than rank 0 (torchrun's and accelerate's ``RANK``), ``bar`` on a terminal, else
    ``lines``."""
    if os.environ.get("DUALVIEW_NO_PROGRESS") or os.environ.get("RANK", "0") != "0":
        return "off"
    isatty = getattr(sys.stderr, "isatty", None)
    return "bar" if isatty is not None and isatty() else "lines"


def progress_enabled() -> bool:
    """Bars are drawn (stderr is a terminal and ``DUALVIEW_NO_PROGRESS`` is not set)."""
    return progress_mode() == "bar"


def line_interval() -> float:
    """``DUALVIEW_PROGRESS_INTERVAL`` in seconds (a non-negative number), else 30."""
    text = os.environ.get("DUALVIEW_PROGRESS_INTERVAL", "").strip()
    if not text:
        return DEFAULT_INTERVAL
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise DualviewError(
            f"DUALVIEW_PROGRESS_INTERVAL: {text!r} is not a number of seconds (0 or more)"
        )
    return value


def quiet_library_bars() -> None:
    """Keep Hugging Face's own bars ("Loading weights", downloads, ``datasets``' map and
    save bars) out of logs.

    The CLI calls this when `progress_enabled` is false. transformers and ``datasets`` read
    their environment switches once, when imported, and the CLI's commands import
    transformers before any code runs, so its switch is flipped by a call too.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as transformers_logging

    disable_progress_bars()
    transformers_logging.disable_progress_bar()
    if "datasets" in sys.modules:  # imported already: its switch was read; flip it
        sys.modules["datasets"].disable_progress_bars()


def clock_text(seconds: float) -> str:
    """``H:MM:SS``."""
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _rate_text(rate: float | None) -> str:
    """Items per second, or seconds per item when that reads better (slower than 1/s)."""
    if not rate:
        return "-/s"
    if rate < 1:
        return f"{1 / rate:.1f} s each"
    return f"{rate:.1f}/s" if rate < 100 else f"{rate:,.0f}/s"


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


@dataclass
class _LineTask:
    """One task's counts and when it was last printed (`LineProgress`)."""

    description: str
    total: float | None
    started: float
    status: str = ""
    completed: float = 0.0
    base: float = 0.0  # the count the task resumed from (not work done by this run)
    updated: bool = False
    printed_at: float | None = None
    printed_completed: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)


class LineProgress:
    """Progress as plain lines (see the module docstring); rich's ``Progress`` interface.

    ``add_task``, ``update`` and ``advance`` take what rich's do. The first ``update`` of a
    task that sets ``completed`` before any ``advance`` sets the count it starts from (a
    resumed job), so the rate counts only the work of this run.
    """

    def __init__(
        self,
        enabled: bool = True,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self.interval = line_interval() if interval is None and enabled else (interval or 0.0)
        self.clock = clock
        self.tasks: dict[int, _LineTask] = {}

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            for task in self.tasks.values():
                self._finish(task)

    def add_task(
        self, description: str, total: float | None = None, status: str = "", **fields: Any
    ) -> int:
        task_id = len(self.tasks)
        self.tasks[task_id] = _LineTask(description, total, self.clock(), status, fields=fields)
        return task_id

    def update(
        self,
        task_id: int,
        *,
        total: float | None = None,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        status: str | None = None,
        **fields: Any,
    ) -> None:
        task = self.tasks[task_id]
        if completed is not None:
            task.completed = completed
            if not task.updated:
                task.base = completed
        if advance is not None:
            task.completed += advance
        task.updated = True
        if total is not None:
            task.total = total
        if description is not None:
            task.description = description
        if status is not None:
            task.status = status
        task.fields.update(fields)
        self._maybe_print(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def _maybe_print(self, task: _LineTask) -> None:
        now = self.clock()
        last = task.started if task.printed_at is None else task.printed_at
        if self.enabled and now - last >= self.interval:
            self._print(task, now)

    def _finish(self, task: _LineTask) -> None:
        done = task.printed_completed == task.completed
        if self.enabled and task.printed_at is not None and not done:
            self._print(task, self.clock())

    def _print(self, task: _LineTask, now: float) -> None:
        task.printed_at, task.printed_completed = now, task.completed
        print(self.line(task, now), file=sys.stderr, flush=True)

    def line(self, task: _LineTask, now: float) -> str:
        """``DESCRIPTION: DONE/TOTAL (P%), RATE/s, elapsed H:MM:SS, ETA H:MM:SS[, STATUS]``."""
        elapsed = now - task.started
        rate = (task.completed - task.base) / elapsed if elapsed > 0 else None
        parts = [f"{_amount(task.completed)} done"]
        if task.total:
            share = 100.0 * task.completed / task.total
            parts = [f"{_amount(task.completed)}/{_amount(task.total)} ({share:.0f}%)"]
        parts.append(_rate_text(rate))
        parts.append(f"elapsed {clock_text(elapsed)}")
        if task.total:
            left = max(task.total - task.completed, 0.0)
            eta = clock_text(left / rate) if rate else "unknown" if left else clock_text(0)
            parts.append(f"ETA {eta}")
        if task.status:
            parts.append(task.status)
        return f"{task.description}: " + ", ".join(parts)


#: The rich displays open now, innermost last (a loop inside another's bars joins it).
_OPEN_BARS: list[Progress] = []


class _Bars(Progress):
    """Rich bars that later loops join while they are open."""

    def __enter__(self) -> _Bars:
        super().__enter__()
        _OPEN_BARS.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _OPEN_BARS.remove(self)
        super().__exit__(*exc)


class _JoinedBars:
    """A loop's bars drawn in an open display; removed from it when the loop ends."""

    def __init__(self, display: Progress) -> None:
        self.display = display
        self.own: list[TaskID] = []

    def __enter__(self) -> _JoinedBars:
        return self

    def __exit__(self, *exc: Any) -> None:
        for task in self.own:
            self.display.remove_task(task)

    def add_task(self, description: str, total: float | None = None, **fields: Any) -> TaskID:
        self.own.append(self.display.add_task(description, total=total, **fields))
        return self.own[-1]

    def update(self, task_id: TaskID, **changes: Any) -> None:
        self.display.update(task_id, **changes)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        self.display.advance(task_id, advance)


def make_progress() -> Any:
    """The display of the current `progress_mode`: rich bars, `LineProgress`, or a silent
    one. Use it as rich's ``Progress``: ``with make_progress() as p: t = p.add_task(...)``
    (give ``status=""``: the bars show that field)."""
    mode = progress_mode()
    if mode != "bar":
        return LineProgress(enabled=mode == "lines")
    if _OPEN_BARS:
        return _JoinedBars(_OPEN_BARS[-1])
    return _Bars(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        transient=False,
    )


def track(
    items: Iterable[T],
    description: str,
    total: float | None = None,
    size: Callable[[T], float] | None = None,
    bar_above: float = 0,
) -> Iterator[T]:
    """Iterate ``items`` with progress (rate, elapsed, ETA when ``total`` is known).

    ``size``: how much work an item is (default 1), when ``total`` counts something else
    (texts of a chunk). ``bar_above``: on a terminal, no bar for work of this size or less
    (a single chunk); in a log every loop is followed, since lines come only after the
    interval anyway.
    """
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if progress_mode() == "bar" and total is not None and total <= bar_above:
        yield from items
        return
    with make_progress() as progress:
        task = progress.add_task(description, total=total, status="")
        for item in items:
            yield item
            progress.advance(task, 1 if size is None else size(item))
