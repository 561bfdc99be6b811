"""Whole output folders (a saved model, a Hub dataset, an HF dataset) are replaced in one step:
a failed or killed writer leaves the previous complete folder, and nothing half-written."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dualview.data.export import export
from dualview.errors import DataError
from dualview.hub.dataset import export_hub_dataset
from dualview.io import folder as atomic_folder
from dualview.io.atomic import write_jsonl
from dualview.io.folder import atomic_dir
from tests.helpers import make_record
from tests.test_write_faults import FAULTS, failing


def _records(out: Path) -> Path:
    """A small records file beside the folder ``out``."""
    path = out.with_suffix(".jsonl")
    write_jsonl(path, [make_record(f"r{i}") for i in range(3)])
    return path


def _model(folder: Path) -> None:
    from dualview.models.bi_encoder import BiEncoder
    from dualview.models.config import ModelConfig
    from tests.train_tiny import make_tiny_encoder

    tiny = make_tiny_encoder(folder.parent / "tiny")
    BiEncoder(ModelConfig(name_or_path=str(tiny))).save(folder, train_config_yaml="seed: 1\n")


# name -> how to write the folder anew. Every folder a stage writes goes through atomic_dir.
FOLDER_WRITERS: dict[str, Callable[[Path], object]] = {
    "export --to hub-dataset": lambda out: export_hub_dataset(_records(out), out),
    "export --to hf": lambda out: export(_records(out), out, to="hf"),
    "BiEncoder.save (trained model)": _model,
}


def _previous(folder: Path) -> dict[str, bytes]:
    folder.mkdir()
    (folder / "README.md").write_bytes(b"previous card\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "weights.bin").write_bytes(b"previous weights")
    return _tree(folder)


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def _leftovers(parent: Path, name: str) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("at", ["fsync", "swap"])
@pytest.mark.parametrize("writer", FOLDER_WRITERS)
def test_a_failed_folder_write_leaves_the_previous_folder(writer, at, fault, tmp_path, monkeypatch):
    out = tmp_path / "out"
    before = _previous(out)
    if at == "fsync":
        monkeypatch.setattr(atomic_folder, "_fsync_tree", failing(FAULTS[fault]))
    else:
        monkeypatch.setattr(atomic_folder, "_exchange", failing(FAULTS[fault]))
    with pytest.raises(DataError) as caught:
        FOLDER_WRITERS[writer](out)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(out))
    assert _tree(out) == before
    assert _leftovers(tmp_path, "out") == [], "temporary folder left"


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
@pytest.mark.parametrize("writer", FOLDER_WRITERS)
def test_a_folder_write_replaces_the_whole_folder(writer, exchange, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _previous(out)
    if not exchange:
        monkeypatch.setattr(atomic_folder, "_exchange", lambda a, b: False)
    FOLDER_WRITERS[writer](out)
    files = _tree(out)
    assert "sub/weights.bin" not in files, "a file of the previous folder survived"
    assert files and files.get("README.md") != b"previous card\n"
    assert _leftovers(tmp_path, "out") == []


def test_the_platform_swaps_folders_in_one_step(tmp_path: Path) -> None:
    """Linux with glibc >= 2.28 has renameat2; the fallback is tested above either way."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x").write_text("a"), (b / "x").write_text("b")
    if not atomic_folder._exchange(a, b):
        pytest.skip("renameat2(RENAME_EXCHANGE) unsupported here; the two-rename path is used")
    assert ((a / "x").read_text(), (b / "x").read_text()) == ("b", "a")


KILLED_WRITER = """
import os, sys
from pathlib import Path
from dualview.io import folder as atomic_folder
atomic_folder._exchange = lambda a, b: False  # the two-rename path, with its kill point between
with atomic_folder.atomic_dir(Path(sys.argv[1])) as tmp:
    (tmp / "README.md").write_text("new card")
"""


@pytest.mark.parametrize("kill_at", [1, 2], ids=["before-swap", "between-renames"])
def test_a_killed_swap_is_undone_by_the_next_writer(kill_at: int, tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = _previous(out)
    env = {**os.environ, "DUALVIEW_FAULT_KILL_AT": str(kill_at)}
    result = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(out)], env=env, check=False)
    assert result.returncode == -9, "the writer was not killed at its fault point"
    if kill_at == 2:  # killed with the previous folder set aside and the new one not yet in
        assert not out.exists() and (tmp_path / ".out.old").is_dir()
    with pytest.raises(RuntimeError), atomic_dir(out):  # the next writer fails too...
        raise RuntimeError("a failing writer")
    assert _tree(out) == before  # ...and the previous folder is back, whole
    assert _leftovers(tmp_path, "out") == []


def test_an_unwritable_parent_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(atomic_folder.tempfile, "mkdtemp", failing(errno.EACCES))
    with pytest.raises(DataError, match=r"out: write: "), atomic_dir(tmp_path / "out"):
        pass


KILLED_SAVE = """
import sys
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
BiEncoder(ModelConfig(name_or_path=sys.argv[1])).save(sys.argv[2])
"""


def test_a_killed_model_save_leaves_nothing_in_tmp_and_the_next_save_cleans_up(
    tmp_path: Path,
) -> None:
    """A model is staged beside its folder, not in ``$TMPDIR``: a save killed as it swaps the
    folder in leaves its staging folder there, and the next save of the same folder removes
    it (a save staged in /tmp left a model-sized folder there for good)."""
    from dualview.models.bi_encoder import BiEncoder
    from dualview.models.config import ModelConfig
    from tests.train_tiny import make_tiny_encoder

    tiny = make_tiny_encoder(tmp_path / "tiny")
    out, scratch, log = tmp_path / "out", tmp_path / "scratch", tmp_path / "fault.log"
    scratch.mkdir()
    save = [sys.executable, "-c", KILLED_SAVE, str(tiny), str(out)]
    env = {**os.environ, "TMPDIR": str(scratch)}
    counted = subprocess.run(save, env={**env, "DUALVIEW_FAULT_LOG": str(log)}, check=False)
    assert counted.returncode == 0
    labels = [line.split("\t")[1] for line in log.read_text().splitlines()]
    kill_at = labels.index("replace out/") + 1
    before = _tree(out)
    killed = subprocess.run(save, env={**env, "DUALVIEW_FAULT_KILL_AT": str(kill_at)}, check=False)
    assert killed.returncode == -9, "the save was not killed at its fault point"
    assert list(scratch.iterdir()) == [], "the killed save left files in $TMPDIR"
    assert _tree(out) == before
    assert any(name.endswith(".staging") for name in _leftovers(tmp_path, "out"))
    BiEncoder(ModelConfig(name_or_path=str(tiny))).save(out)
    assert _leftovers(tmp_path, "out") == []
    assert _tree(out) == before


def test_a_full_disk_while_safetensors_writes_a_model_is_one_clear_error(
    tmp_path: Path, monkeypatch
) -> None:
    """safetensors reports a full disk as its own Rust error, not an OSError: the save still
    ends in `PATH: write: no space left ...` with the previous folder whole and nothing left."""
    import transformers.modeling_utils as modeling_utils
    from safetensors import SafetensorError

    from dualview.models.bi_encoder import BiEncoder
    from dualview.models.config import ModelConfig
    from tests.train_tiny import make_tiny_encoder

    model = BiEncoder(ModelConfig(name_or_path=str(make_tiny_encoder(tmp_path / "tiny"))))
    out = tmp_path / "out"
    before = _previous(out)

    def full_disk(*args, **kwargs):
        raise SafetensorError(
            "Error while serializing: I/O error: No space left on device (os error 28)"
        )

    monkeypatch.setattr(modeling_utils, "safe_save_file", full_disk)
    with pytest.raises(DataError) as caught:
        model.save(out)
    assert (
        str(caught.value)
        == f"{out}: write: no space left on the device; the previous file is unchanged"
    )
    assert _tree(out) == before
    assert _leftovers(tmp_path, "out") == []
