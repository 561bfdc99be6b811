"""Small helpers for tests: run the CLI in a subprocess, build records."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from dualview.data.schema import Document, Record


def run_cli(*args: str, timeout: float = 600, env: dict[str, str] | None = None):
    """Run ``python -m dualview ARGS`` and return the CompletedProcess (text mode)."""
    full_env = {**os.environ, "DUALVIEW_NO_PROGRESS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dualview", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def doc(text: str, doc_id: str | None = None, title: str = "") -> Document:
    return Document.from_text(text, title=title, id=doc_id)


def make_record(record_id: str = "r1", view: str = "orig", **fields: Any) -> Record:
    defaults: dict[str, Any] = {
        "query": "what causes tides",
        "instruction": "explain it for children" if view != "plain" else "",
        "positives": [doc("The Moon pulls the sea.", "p1")],
        "instruction_negatives": [doc("Tidal forcing scales as 2GMr/d^3.", "n1")],
        "hard_negatives": [doc("Salt comes from rivers.", "h1")],
    }
    if view == "dv":
        defaults["parent_id"] = "r0"
    defaults.update(fields)
    return Record(id=record_id, view=view, **defaults)
