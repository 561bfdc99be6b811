"""Hostile use of training runs (issue 35, items 5, 6, 16, 17, 18): a used output_dir, data
edited in place, a resume onto another model, damaged checkpoints, a full disk. Each is one
located error line and exit 2 (never a traceback), with nothing written or lost."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer, BertConfig, BertModel

from dualview import lock
from dualview.cli import main
from dualview.config import load_config
from dualview.data.gold import load_gold
from dualview.eval.export import export_paired
from dualview.pipeline.stages import DONE_FILE
from dualview.resources import embedded_encoder_path
from dualview.train import checkpoint as ckpt
from dualview.train.config import TrainConfig
from dualview.train.config_drift import CHANGES_FILE, SNAPSHOT_FILE, config_changes
from dualview.train.trainer import train
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
STEP2, STEP4 = "step-00000002", "step-00000004"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny") / "tiny", dropout=0.0)


def _config_file(tmp_path: Path, tiny: Path) -> Path:
    """A 4-step tiny run (checkpoints at 2 and 4) on a copy of the training fixture."""
    data = tmp_path / "train.jsonl"
    shutil.copy(FIXTURE, data)
    config = {
        "model": {"name_or_path": str(tiny), "query_max_length": 32, "document_max_length": 48},
        "data": {"train_file": str(data), "num_workers": 0},
        "optim": {"lr": 2e-4, "warmup_steps": 0},
        "output_dir": str(tmp_path / "run"),
        "batch_size": 4,
        "max_steps": 4,
        "checkpoint_every": 2,
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def template(tmp_path_factory, tiny: Path) -> Path:
    """One finished tiny run, trained once for the module."""
    tmp = tmp_path_factory.mktemp("template")
    train(load_config(TrainConfig, _config_file(tmp, tiny), []))
    return tmp / "run"


@pytest.fixture
def finished(tmp_path: Path, tiny: Path, template: Path) -> tuple[Path, Path]:
    """A finished tiny run of its own (a copy of the template's): its config and folder. The
    checkpoints name the template's data file: this run's copy only moved (same sha256)."""
    config = _config_file(tmp_path, tiny)
    shutil.copytree(template, tmp_path / "run")
    return config, tmp_path / "run"


@pytest.fixture
def trained_here(tmp_path: Path, tiny: Path) -> tuple[Path, Path]:
    """A finished tiny run whose checkpoints name this test's data file (same path)."""
    config = _config_file(tmp_path, tiny)
    train(load_config(TrainConfig, config, []))
    return config, tmp_path / "run"


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """``dualview ARGS`` in this process: exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", ["dualview", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error(code: int, err: str, *parts: str) -> str:
    """Exit 2, no traceback, and one ``error: ...`` line (the last) holding ``parts``."""
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert code == 2, err[-3000:]
    assert "Traceback" not in err and errors == lines[-1:], err[-3000:]
    for part in parts:
        assert part in errors[0], errors[0]
    return errors[0]


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but the lock (path -> bytes): to show nothing was written."""
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != lock.LOCK_FILE]
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def logged_steps(run: Path) -> list[int]:
    lines = (run / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["step"] for line in lines if "loss" in json.loads(line)]


# -- item 5: a fresh run in a used output_dir --------------------------------------------------


def test_a_fresh_run_refuses_a_folder_holding_an_earlier_run(finished, monkeypatch, capsys):
    config, run = finished
    before = contents(run)
    code, _, err = cli(monkeypatch, capsys, "train", str(config))
    assert_one_error(code, err, str(run), "--resume", "--overwrite-output-dir", "checkpoints")
    assert contents(run) == before


def test_a_later_resume_never_continues_the_overwritten_run(finished, monkeypatch, capsys):
    """The issue's case: a fresh run killed before its first checkpoint, then resumed, must not
    resume from the earlier run's step 4 (its log read steps 1, 2, 5, 6)."""
    config, run = finished

    class Killed(Exception):
        pass

    def kill_before_checkpoint(self, state):
        raise Killed

    monkeypatch.setattr("dualview.train.trainer.Trainer.save_checkpoint", kill_before_checkpoint)
    with pytest.raises(Killed):
        cli(monkeypatch, capsys, "train", str(config), "--overwrite-output-dir")
    assert not (run / "checkpoints").exists() and not (run / "model").exists()
    monkeypatch.undo()
    code, out, err = cli(monkeypatch, capsys, "train", str(config), "--resume")
    assert code == 0, err
    assert "starting from scratch" in out and "resumed from" not in out
    assert logged_steps(run) == [1, 2, 3, 4]


def test_overwrite_does_not_go_with_resume(finished, monkeypatch, capsys):
    config, run = finished
    before = contents(run)
    args = ("train", str(config), "--resume", "--overwrite-output-dir")
    assert_one_error(*cli(monkeypatch, capsys, *args)[::2], "--resume")
    assert contents(run) == before


# -- item 6: training data edited in place -----------------------------------------------------


def _edit_in_place(config: Path) -> None:
    data = Path(yaml.safe_load(config.read_text())["data"]["train_file"])
    text = data.read_text(encoding="utf-8")
    data.write_text(text.replace('"query": "', '"query": "edited ', 1), encoding="utf-8")


def test_data_edited_in_place_stops_the_resume(trained_here, monkeypatch, capsys):
    config, run = trained_here
    _edit_in_place(config)
    before = contents(run)
    code, _, err = cli(monkeypatch, capsys, "train", str(config), "--resume")
    assert code == 2 and "Traceback" not in err, err
    assert "data.train_file" in err and "edited in place (sha256 " in err
    assert contents(run) == before

    code, _, err = cli(
        monkeypatch, capsys, "train", str(config), "--resume", "--allow-config-change"
    )
    assert code == 0, err
    [entry] = json.loads((run / CHANGES_FILE).read_text())
    [change] = entry["changes"]
    assert change["key"] == "data.train_file" and change["old"] == change["new"]
    assert change["old_sha256"] != change["new_sha256"]


def test_a_snapshot_without_hashes_compares_paths_only(finished):
    """Checkpoints written before file hashes existed still resume (nothing to compare)."""
    config, run = finished
    saved = json.loads((run / "checkpoints" / STEP4 / SNAPSHOT_FILE).read_text())
    current = load_config(TrainConfig, config, [])
    saved["config"]["data"]["train_file"] = str(current.data.train_file)  # same path
    assert [c.key for c in config_changes(saved, current)] == []
    _edit_in_place(config)
    assert [c.key for c in config_changes(saved, current)] == ["data.train_file"]
    del saved["file_sha256"]
    assert config_changes(saved, current) == []


# -- item 16: --allow-config-change onto a model the checkpoint does not fit -------------------


def _wider_encoder(folder: Path) -> Path:
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_encoder_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("change", ["size", "kind"])
def test_an_incompatible_model_is_refused_before_recording(
    change, finished, tmp_path, monkeypatch, capsys
):
    config, run = finished
    if change == "size":
        sets = [f"model.name_or_path={_wider_encoder(tmp_path / 'wider')}"]
        reason = "size mismatch"
    else:
        sets = ["model.kind=cross_encoder", "loss.objective=rerank_bce"]
        reason = "Missing key(s)"
    before = contents(run)
    flags = [arg for item in sets for arg in ("--set", item)]
    code, _, err = cli(
        monkeypatch, capsys, "train", str(config), "--resume", "--allow-config-change", *flags
    )
    model_pt = run / "checkpoints" / STEP4 / "model.pt"
    assert_one_error(
        code, err, f"{model_pt}: checkpoint: does not fit the configured model", reason
    )
    assert contents(run) == before  # no config_changes.json, no log line


# -- item 17: damaged checkpoints --------------------------------------------------------------

DAMAGE = {
    "model.pt truncated": ("model.pt", None),
    "optimizer.pt truncated": ("optimizer.pt", None),
    "rng-0.pt truncated": ("rng-0.pt", None),
    "state.json garbage": ("state.json", b'{"step": '),
    "state.json not counters": ("state.json", b'{"step": "4", "epoch": 0, "batch_index": 0}'),
    "config.json garbage": ("config.json", b"\x00\xff garbage"),
    "config.json not a snapshot": ("config.json", b"[1, 2]"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_one_located_error(damage, finished, monkeypatch, capsys):
    config, run = finished
    name, garbage = DAMAGE[damage]
    path = run / "checkpoints" / STEP4 / name
    if garbage is None:
        os.truncate(path, path.stat().st_size // 2)
    else:
        path.write_bytes(garbage)
    before = contents(run)
    code, _, err = cli(monkeypatch, capsys, "train", str(config), "--resume")
    assert_one_error(code, err, f"{path}: checkpoint: damaged", f"to resume from {STEP2}")
    assert contents(run) == before
    shutil.rmtree(path.parent)  # the way out the message names
    code, out, err = cli(monkeypatch, capsys, "train", str(config), "--resume")
    assert code == 0 and f"{STEP2} at step 2" in out, err


# -- item 18: a full disk -----------------------------------------------------------------------


def _full_disk_for(name: str, step_dir: str, monkeypatch) -> None:
    """Writes of ``step_dir``'s ``name`` go to /dev/full (ENOSPC from the kernel)."""
    real_open = Path.open

    def open_(self, mode="r", *args, **kwargs):
        if self.name == name and self.parent.name.startswith(step_dir) and "w" in mode:
            return real_open(Path("/dev/full"), mode, *args, **kwargs)
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)


@pytest.mark.parametrize("name", ["model.pt", "optimizer.pt", "state.json", SNAPSHOT_FILE])
def test_a_full_disk_while_checkpointing_keeps_the_earlier_checkpoint(
    name, tmp_path, tiny, monkeypatch, capsys
):
    config = _config_file(tmp_path, tiny)
    run = tmp_path / "run"
    _full_disk_for(name, STEP4, monkeypatch)
    code, _, err = cli(monkeypatch, capsys, "train", str(config))
    failed = run / "checkpoints" / f"{STEP4}.tmp" / name
    assert_one_error(code, err, f"{failed}: write: no space left on the device", "intact")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [STEP2]
    monkeypatch.undo()
    code, out, err = cli(monkeypatch, capsys, "train", str(config), "--resume")
    assert code == 0 and f"{STEP2} at step 2" in out, err
    assert logged_steps(run) == [1, 2, 3, 4]


def test_a_failed_fsync_of_a_checkpoint_is_one_error(tmp_path, tiny, monkeypatch, capsys):
    real_fsync = os.fsync

    def no_space_in_checkpoints(fd):
        if ".tmp/" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(ckpt.os, "fsync", no_space_in_checkpoints)
    code, _, err = cli(monkeypatch, capsys, "train", str(_config_file(tmp_path, tiny)))
    assert_one_error(code, err, f"{STEP2}.tmp/rng-0.pt: write: no space left on the device")
    assert not list((tmp_path / "run" / "checkpoints").iterdir())


def test_a_full_disk_while_taking_the_lock_is_one_error(tmp_path, tiny, monkeypatch, capsys):
    def no_space(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(lock.os, "pwrite", no_space)
    code, _, err = cli(monkeypatch, capsys, "train", str(_config_file(tmp_path, tiny)))
    lock_file = tmp_path / "run" / lock.LOCK_FILE
    assert_one_error(code, err, f"{lock_file}: lock: no space left on the device")
    assert not (tmp_path / "run" / "train_log.jsonl").exists()


# -- dualview run: the training stage ----------------------------------------------------------


def _experiment(tmp_path: Path, tiny: Path) -> Path:
    eval_dir = tmp_path / "paired"
    export_paired(load_gold("test")[:4], eval_dir)
    config = {
        "name": "hostile",
        "run_dir": str(tmp_path / "exp"),
        "instructions": {"path": "gold:train", "views": ["orig"], "limit": 8},
        "synthesis": {"enabled": False},
        "mixes": [{"name": "Ins-orig", "preset": "ins-orig", "size": 8}],
        "negatives": {"total": 4},
        "training": {
            "config": {
                "model": {"name_or_path": str(tiny), "query_max_length": 32},
                "data": {"train_file": "unused", "num_negatives": 2},
                "output_dir": "unused",
                "batch_size": 2,
                "max_steps": 2,
                "checkpoint_every": 1,
            }
        },
        "evaluation": {"benchmarks": [f"paired={eval_dir}"], "include_base": False},
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_run_with_a_full_disk_in_training_stops_and_resumes(tmp_path, tiny, monkeypatch, capsys):
    experiment = _experiment(tmp_path, tiny)
    _full_disk_for("model.pt", "step-00000002", monkeypatch)
    code, _, err = cli(monkeypatch, capsys, "run", str(experiment))
    assert_one_error(code, err, "step-00000002.tmp/model.pt: write: no space left")
    (stage,) = (tmp_path / "exp").glob("train-Ins-orig-*")
    assert not (stage / DONE_FILE).exists()
    assert sorted(p.name for p in (stage / "checkpoints").iterdir()) == ["step-00000001"]
    monkeypatch.undo()
    code, _, err = cli(monkeypatch, capsys, "run", str(experiment))
    assert code == 0, err[-3000:]
    done = json.loads((stage / DONE_FILE).read_text())
    assert done["resumed"] is True and done["steps"] == 2


def test_run_restarts_a_training_stage_killed_before_its_first_checkpoint(
    tmp_path, tiny, monkeypatch, capsys
):
    """The stage's folder is its own: a log left without a checkpoint is started over (the
    fresh-run refusal is for folders a user names)."""
    experiment = _experiment(tmp_path, tiny)

    class Killed(Exception):
        pass

    def kill_before_checkpoint(self, state):
        raise Killed

    monkeypatch.setattr("dualview.train.trainer.Trainer.save_checkpoint", kill_before_checkpoint)
    with pytest.raises(Killed):
        cli(monkeypatch, capsys, "run", str(experiment))
    (stage,) = (tmp_path / "exp").glob("train-Ins-orig-*")
    assert (stage / "train_log.jsonl").exists() and not (stage / "checkpoints").exists()
    monkeypatch.undo()
    code, _, err = cli(monkeypatch, capsys, "run", str(experiment))
    assert code == 0, err[-3000:]
    assert json.loads((stage / DONE_FILE).read_text())["resumed"] is False
    assert logged_steps(stage) == [1, 2]


# -- item 17: a truncated model.safetensors (a model folder, or a reranker's backbone) -----------


@pytest.fixture
def damaged_model(tmp_path: Path, template: Path) -> Path:
    folder = tmp_path / "damaged-model"
    shutil.copytree(template / "model", folder)
    weights = folder / "model.safetensors"
    os.truncate(weights, 100)
    return folder


@pytest.mark.parametrize("kind", ["bi_encoder", "cross_encoder"])
def test_training_from_a_truncated_safetensors_is_one_error(
    kind, damaged_model, tmp_path, tiny, monkeypatch, capsys
):
    config = _config_file(tmp_path, tiny)
    sets = [f"model.name_or_path={damaged_model}", f"model.kind={kind}"]
    if kind == "cross_encoder":
        sets.append("loss.objective=rerank_bce")
    flags = [arg for item in sets for arg in ("--set", item)]
    code, _, err = cli(monkeypatch, capsys, "train", str(config), *flags)
    assert_one_error(code, err, f"cannot load model '{damaged_model}'", "weights file is damaged")


def test_evaluating_a_truncated_safetensors_is_one_error(damaged_model) -> None:
    from dualview.models.pretrained import ModelLoadError
    from dualview.retrieval.encode import load_sentence_transformer

    with pytest.raises(ModelLoadError, match="weights file is damaged"):
        load_sentence_transformer(str(damaged_model), device="cpu")
