"""Extension by registration: a package outside ``src/`` (``tests/plugins``) adds a model
family and a training objective through entry points, and ``dualview train`` uses them with
no file of dualview edited; an unknown kind is the registry's one located error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from dualview.config import validate_config
from dualview.errors import ConfigError
from dualview.train.config import TrainConfig
from dualview.train.families import FAMILIES
from tests.train_tiny import make_tiny_encoder

PLUGINS = Path(__file__).parent / "plugins"
FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
ENTRY_POINTS = """\
[dualview.model_families]
frozen_embeddings_bi_encoder = dualview_example_plugin.family:FAMILY

[dualview.objectives]
hinge_margin = dualview_example_plugin.objective:build
"""


def _install(site: Path) -> None:
    """What ``pip install`` of the plugin leaves: a ``.dist-info`` with its entry points."""
    info = site / "dualview_example_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: dualview-example-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)


def _embeddings(model_dir: Path) -> dict:
    weights = load_file(next(model_dir.rglob("model.safetensors")))
    return {k: v for k, v in weights.items() if "word_embeddings" in k}


def test_a_plugin_family_and_objective_train_through_the_cli(tmp_path: Path) -> None:
    tiny = make_tiny_encoder(tmp_path / "tiny", dropout=0.0)
    site = tmp_path / "site"
    _install(site)
    config = tmp_path / "train.yaml"
    settings = {
        "model": {
            "kind": "frozen_embeddings_bi_encoder",
            "name_or_path": str(tiny),
            "query_max_length": 16,
            "document_max_length": 16,
        },
        "data": {"train_file": str(FIXTURE), "num_workers": 0, "num_negatives": 1},
        "loss": {"objective": "hinge_margin", "temperature": 0.5},
        "optim": {"lr": 0.01, "warmup_steps": 0},
        "output_dir": str(tmp_path / "run"),
        "batch_size": 4,
        "max_steps": 2,
    }
    config.write_text(yaml.safe_dump(settings))
    path = os.pathsep.join([str(site), str(PLUGINS), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "DUALVIEW_NO_PROGRESS": "1"}
    cli = [sys.executable, "-c", "from dualview.cli import main; main()"]
    proc = subprocess.run(
        [*cli, "train", str(config)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").open()]
    assert [row["step"] for row in log] == [1, 2] and log[0]["loss"] > 0
    trained = tmp_path / "run" / "model"
    before, after = _embeddings(tiny), _embeddings(trained)
    assert before and before.keys() == after.keys()
    assert all(after[k].equal(before[k]) for k in before)  # the family froze them
    everything = load_file(next(trained.rglob("model.safetensors")))
    original = load_file(next(tiny.rglob("model.safetensors")))
    assert any(not everything[k].equal(original[k]) for k in original if k not in before)


def test_an_unknown_kind_lists_the_registered_families() -> None:
    settings = {"model": {"kind": "nope"}, "data": {"train_file": "x"}, "output_dir": "o"}
    with pytest.raises(ConfigError, match=r"model\.kind: unknown model kind 'nope'; known: "):
        validate_config(TrainConfig, settings, "t.yaml")
    assert {"bi_encoder", "cross_encoder", "llm_reranker"} <= set(FAMILIES.names())
