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


def quiet_library_bars() -> None:
    """Keep Hugging Face's own bars (downloads, "Loading weights") out of logs.

    The CLI calls this when `progress_enabled` is false. transformers reads
    ``HF_HUB_DISABLE_PROGRESS_BARS`` once, when it is imported, and the CLI's commands import
    it before any code runs, so the switch is flipped on both libraries too.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as transformers_logging

    disable_progress_bars()
    transformers_logging.disable_progress_bar()


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
