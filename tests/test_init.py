"""``dualview init DIR`` (`dualview.demo.starter`): a ready first-run experiment folder for
someone who installed the wheel, its data inside the folder, never written over a user's
folder unasked."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualview.demo.starter import CONFIGS, EXPERIMENT, STARTER_DIR, write_starter
from tests.helpers import invoke_in_process

ROOT = Path(__file__).resolve().parents[1]


def test_init_writes_a_folder_whose_experiment_plans_from_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The written experiment passes the pipeline's dry run (config validation, every stage
    input present) from inside the folder, and names no path outside it."""
    code, out, err = invoke_in_process(["init", str(tmp_path / "my-exp")], capsys)
    assert code == 0, err
    assert f"dualview run {EXPERIMENT}" in out
    monkeypatch.chdir(tmp_path / "my-exp")
    for rel in CONFIGS:
        text = Path(rel).read_text()
        assert "../shared" not in text and "src/dualview" not in text, rel
    code, out, err = invoke_in_process(["run", str(EXPERIMENT), "--dry-run"], capsys)
    assert code == 0, err
    assert "plan for runs/gold-cpu" in err + out and "error" not in err
    assert not Path("runs/gold-cpu/eval").exists()  # a plan only


def test_init_refuses_a_non_empty_folder_and_force_touches_only_its_own_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mine"
    (folder / "configs" / "train").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes")
    (folder / "configs" / "train" / "minilm-cpu.yaml").write_text("my edits")
    code, out, err = invoke_in_process(["init", str(folder)], capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: {folder}: folder: not empty: give a new or empty folder, or --force to add "
        "the starter's files (overwriting those of its files that are there; nothing else "
        "is touched)"
    ]
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == [
        "minilm-cpu.yaml",
        "notes.txt",
    ]
    code, out, err = invoke_in_process(["init", str(folder), "--force"], capsys)
    assert code == 0, err
    assert f"overwrote {folder / 'configs' / 'train' / 'minilm-cpu.yaml'}" in err
    assert (folder / "notes.txt").read_text() == "my notes"
    assert (folder / EXPERIMENT).is_file()


def test_init_on_a_file_is_one_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "taken"
    path.write_text("x")
    code, _, err = invoke_in_process(["init", str(path)], capsys)
    assert (code, err.strip()) == (2, f"error: {path}: folder: exists and is not a folder")


def test_the_shipped_configs_are_the_repository_s(tmp_path: Path) -> None:
    """The package's copies (`demo/starter/`) stay equal to ``configs/``: a change to the
    first-run configs reaches pip users."""
    for rel in CONFIGS:
        assert (STARTER_DIR / rel).read_bytes() == (ROOT / rel).read_bytes(), rel
    result = write_starter(tmp_path / "new")
    assert result.overwritten == [] and EXPERIMENT in result.written
