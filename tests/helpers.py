"""Small helpers for tests: run the CLI in a subprocess, build records."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _gloo_rank(rank: int, port: int, fn: Callable[..., Any], args: tuple, out: str) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.set_num_threads(1)
    try:
        result = fn(*args)
        if rank == 0:
            torch.save(result, out)
    finally:
        dist.destroy_process_group()


def on_two_gloo_ranks(fn: Callable[..., Any], args: tuple, workdir: Path) -> Any:
    """``fn(*args)`` run in 2 spawned processes joined by a gloo process group; rank 0's
    result. ``fn`` must be a module-level function (spawn pickles it by name)."""
    import torch
    import torch.multiprocessing as mp

    out = workdir / "rank0.pt"
    mp.spawn(_gloo_rank, args=(free_port(), fn, args, str(out)), nprocs=2)
    return torch.load(out, weights_only=False)


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


def invoke_in_process(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """``dualview ARGV`` run in-process (``dualview.cli.main``): (exit code, stdout, stderr).
    A traceback comes back as code -1 with the traceback appended to stderr."""
    from dualview.cli import main

    saved, sys.argv = sys.argv, ["dualview", *argv]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        captured = capsys.readouterr()
        return -1, captured.out, captured.err + traceback.format_exc()
    finally:
        sys.argv = saved
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def pin_parser_edit(monkeypatch: Any, cls: type, replay_from: int = 1) -> int:
    """Make ``cls`` (a pinned task class) look as if its source had been edited and the new
    digest pinned as the next parser version (`dualview.synth.parser_versions`); returns
    that version. ``replay_from``: the lowest version whose cached answers are replayed."""
    from dualview.synth import parser_versions

    name = parser_versions.class_name(cls)
    pinned = parser_versions.PINNED[name]
    version = max(pinned.values()) + 1
    monkeypatch.setitem(parser_versions.PINNED, name, {**pinned, "edited": version})
    monkeypatch.setitem(parser_versions.REPLAY_FROM, name, replay_from)
    digest = parser_versions.parser_digest
    edited = {name}
    monkeypatch.setattr(
        parser_versions,
        "parser_digest",
        lambda c: "edited" if parser_versions.class_name(c) in edited else digest(c),
    )
    return version
