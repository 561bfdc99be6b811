"""``benchmarks/carry_parts.py``: a folder cut into parts comes back whole, part by part
(as calls to a GPU machine carry them), and a damaged part or manifest is a located error."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "carry_parts.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def _model(folder: Path) -> Path:
    """A small folder shaped like a model: nested files, one binary larger than a part."""
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}\n')
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}\n')
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 9000)  # 2.2 MiB
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_parts_carried_one_call_at_a_time_unpack_to_the_same_folder(tmp_path: Path) -> None:
    model = _model(tmp_path / "minilm")
    assert (
        _run("split", str(model), "--out", str(tmp_path / "carry"), "--part-mib", "1").returncode
        == 0
    )
    manifest = json.loads((tmp_path / "carry" / "manifest.json").read_text())
    assert len(manifest["parts"]) == 3
    into = tmp_path / "machine-tmp"
    for number, entry in enumerate(manifest["parts"]):  # each call carries the manifest + one part
        call = tmp_path / f"call{number}"
        call.mkdir()
        shutil.copy(tmp_path / "carry" / "manifest.json", call)
        shutil.copy(tmp_path / "carry" / entry["file"], call)
        proc = _run("gather", str(call), "--into", str(into))
        last = number == len(manifest["parts"]) - 1
        assert proc.returncode == (0 if last else 3), proc.stderr
        if not last:
            assert f"missing {2 - number}" in proc.stdout
    assert proc.stdout.strip().endswith(str(into / "minilm"))
    assert _files(into / "minilm") == _files(model)
    again = _run("gather", str(tmp_path / "call0"), "--into", str(into))  # already whole: no-op
    assert again.returncode == 0 and _files(into / "minilm") == _files(model)


def test_the_same_folder_splits_to_the_same_bytes(tmp_path: Path) -> None:
    model = _model(tmp_path / "m")
    for out in ("a", "b"):
        assert _run("split", str(model), "--out", str(tmp_path / out)).returncode == 0
    first = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert first == json.loads((tmp_path / "b" / "manifest.json").read_text())


@pytest.mark.parametrize("damage", ["part", "manifest", "source"])
def test_bad_input_is_an_error_that_names_the_file(tmp_path: Path, damage: str) -> None:
    model = _model(tmp_path / "m")
    carry = tmp_path / "carry"
    if damage == "source":
        proc = _run("split", str(tmp_path / "absent"), "--out", str(carry))
        assert proc.returncode == 2 and "absent: no such file or folder" in proc.stderr
        return
    _run("split", str(model), "--out", str(carry), "--part-mib", "1")
    target = carry / ("part-001.bin" if damage == "part" else "manifest.json")
    target.write_bytes(target.read_bytes()[:-1] + b"x")
    proc = _run("gather", str(carry), "--into", str(tmp_path / "into"))
    assert proc.returncode == 2 and str(target) in proc.stderr
    assert not (tmp_path / "into" / "m").exists()  # nothing unpacked from a damaged stream


@pytest.mark.parametrize("where", ["split-inside", "split-same", "gather-same", "gather-inside"])
def test_an_output_folder_overlapping_the_input_is_refused_and_nothing_is_written(
    tmp_path: Path, where: str
) -> None:
    model = _model(tmp_path / "m")
    before = _files(model)
    if where.startswith("split"):
        out = model / "carry" if where == "split-inside" else model
        proc = _run("split", str(model), "--out", str(out))
        assert proc.returncode == 2 and "overlaps the input" in proc.stderr
        assert _files(model) == before
        return
    carry = tmp_path / "carry"
    _run("split", str(model), "--out", str(carry), "--part-mib", "1")
    parts = _files(carry)
    into = carry if where == "gather-same" else carry / "into"
    proc = _run("gather", str(carry), "--into", str(into))
    assert proc.returncode == 2 and "overlaps the input" in proc.stderr
    assert _files(carry) == parts
