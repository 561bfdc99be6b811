"""Progress display for long work (rich), quiet when not attached to a terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")


def progress_enabled() -> bool:
    """Bars are drawn on a terminal unless ``DUALVIEW_NO_PROGRESS`` is set."""
    return sys.stderr.isatty() and not os.environ.get("DUALVIEW_NO_PROGRESS")


def make_progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        disable=not progress_enabled(),
        transient=False,
    )


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate ``items`` with a progress bar (rate, elapsed, ETA when ``total`` is known)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with make_progress() as progress:
        task = progress.add_task(description, total=total, status="")
        for item in items:
            yield item
            progress.advance(task)
