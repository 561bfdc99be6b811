"""ENOSPC and EIO injected into the writers: the previous complete file stays intact, no
temporary file is left behind, and the error is one clear line naming the file."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dualview.data.formats.parquet import write as write_parquet
from dualview.data.manifest import write_manifest
from dualview.errors import DataError
from dualview.io import atomic
from dualview.io.append import AppendJsonlWriter
from dualview.io.atomic import atomic_write_json, atomic_write_text, write_jsonl
from dualview.report import write_report
from dualview.report.table import ConfigResult
from tests.helpers import make_record


def _report(path: Path) -> None:
    row = ConfigResult("base")
    row.metrics = {"paired pairwise accuracy": 0.5}
    write_report([row], path.parent, title="faults")


def _manifest(path: Path) -> None:
    write_manifest(path.parent / "train.jsonl", {"n": 2})


def _jsonl(path: Path) -> None:
    write_jsonl(path, [make_record("new")])


# name -> (file written, how to write it anew). Every stage file goes through one of these.
WRITERS: dict[str, tuple[str, Callable[[Path], object]]] = {
    "AtomicJsonlWriter (write_jsonl)": ("out.jsonl", _jsonl),
    "atomic_write_text": ("notes.md", lambda p: atomic_write_text(p, "new text\n")),
    "atomic_write_json": ("stats.json", lambda p: atomic_write_json(p, {"new": True})),
    "manifest": ("train.jsonl.manifest.json", _manifest),
    "atomic_path (Parquet)": ("out.parquet", lambda p: write_parquet([make_record("new")], p)),
    "atomic_path (plots, report)": ("report.md", _report),
}  # fmt: skip

FAULTS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}


def failing(code: int):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return fail


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("at", ["fsync", "rename"])
@pytest.mark.parametrize("writer", WRITERS)
def test_a_failed_write_leaves_the_previous_file(writer, at, fault, tmp_path, monkeypatch):
    name, write = WRITERS[writer]
    target = tmp_path / name
    target.write_bytes(b"previous complete content\n")
    monkeypatch.setattr(atomic.os, "fsync" if at == "fsync" else "replace", failing(FAULTS[fault]))
    with pytest.raises(DataError) as caught:
        write(target)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(tmp_path))
    reason = "no space left" if fault == "ENOSPC" else "input/output error"
    assert reason in message and "previous file is unchanged" in message
    assert target.read_bytes() == b"previous complete content\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "temporary left"


@pytest.mark.parametrize("fault", FAULTS)
def test_append_writer_keeps_every_line_written_before(fault, tmp_path, monkeypatch) -> None:
    path = tmp_path / "cache.jsonl"
    with AppendJsonlWriter(path) as writer:
        writer.write({"n": 1})
    monkeypatch.setattr(atomic.os, "fsync", failing(FAULTS[fault]))
    writer = AppendJsonlWriter(path)
    with pytest.raises(DataError, match=r"cache\.jsonl: write: "):
        writer.write({"n": 2})  # sync_every=1: fsyncs at once
    assert path.read_text().splitlines()[0] == '{"n": 1}'


def test_the_cli_reports_a_full_disk_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    from dualview.cli import main

    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(source, [make_record("r1")])
    out.write_text("previous\n")
    monkeypatch.setattr(atomic.os, "fsync", failing(errno.ENOSPC))
    monkeypatch.setattr(sys, "argv", ["dualview", "data", "convert", str(source), "-o", str(out)])
    with pytest.raises(SystemExit) as caught:
        main()
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "Traceback" not in err
    assert (
        err.strip()
        == f"error: {out}: write: no space left on the device; the previous file is unchanged"
    )
    assert out.read_text() == "previous\n"


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_an_atomic_write_gets_the_usual_permissions(umask, tmp_path, monkeypatch) -> None:
    # mkstemp creates 0600 files: without a chmod every report and record would be private
    monkeypatch.setattr(atomic, "_UMASK", umask)
    atomic_write_text(tmp_path / "out.txt", "x\n")
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o666 & ~umask
