"""Extension by registration: a package outside ``src/`` (``tests/plugins``) adds a model
family, a training objective, an LLM backend, a synthesis task and a benchmark through entry
points, and ``dualview train``, ``dualview restate`` and ``dualview eval`` use them with no
file of dualview edited; an unknown kind is the registry's one located error."""

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
from dualview.models.gguf import EMBEDDED_LLM
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

[dualview.backends]
echo = dualview_example_plugin.backend:KIND

[dualview.tasks]
restate = dualview_example_plugin.task:KIND

[dualview.benchmarks]
first_hit = dualview_example_plugin.benchmark:FirstHit
"""
ORIG = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"


def _install(site: Path) -> None:
    """What ``pip install`` of the plugin leaves: a ``.dist-info`` with its entry points."""
    info = site / "dualview_example_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: dualview-example-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)


def _env(site: Path) -> dict[str, str]:
    """The environment of a process that sees the installed plugin."""
    path = os.pathsep.join([str(site), str(PLUGINS), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "DUALVIEW_NO_PROGRESS": "1"}


def _run_cli(site: Path, *commands: list[str]) -> list[dict]:
    """Each command's exit code, stdout and stderr, run as ``dualview ...`` in one process
    (`tests/plugins/run_cli.py`)."""
    script = [sys.executable, str(PLUGINS / "run_cli.py")]
    proc = subprocess.run(
        script,
        input=json.dumps(commands),
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


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
    cli = [sys.executable, "-c", "from dualview.cli import main; main()"]
    proc = subprocess.run(
        [*cli, "train", str(config)], env=_env(site), capture_output=True, text=True, timeout=600
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


def test_a_plugin_backend_task_and_benchmark_work_through_the_cli(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site)
    out, again, bad = tmp_path / "restated.jsonl", tmp_path / "again.jsonl", tmp_path / "bad.jsonl"
    restate = ["restate", str(ORIG), "--limit", "3", "--llm-backend", "echo"]
    prefix = ["--set", 'backend.prefix="Again: "']
    helped, first, cached, wrong, evaluated = _run_cli(
        site,
        ["--help"],
        [*restate, *prefix, "-o", str(out)],
        [*restate, *prefix, "-o", str(again), "--llm-cache", str(out) + ".cache.jsonl"],
        [*restate, "--set", "backend.n_ctx=512", "-o", str(bad)],
        ["eval", "-b", "first_hit", "--first-stage", "bm25", "-o", str(tmp_path / "eval")],
    )
    assert "Restate each record's instruction (a plugin task)." in helped["stdout"]
    # the task's records, answered by the echo backend with its own setting
    assert first["code"] == 0, first["stderr"][-2000:]
    originals = [json.loads(line) for line in ORIG.read_text().splitlines()[:3]]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in written] == [r["id"] + "-restated" for r in originals]
    assert [r["instruction"] for r in written] == ["Again: " + r["instruction"] for r in originals]
    stats = json.loads(out.with_name(out.name + ".stats.json").read_text())
    assert stats["model"] == f"echo:{EMBEDDED_LLM}:Again: "
    # the plugin backend's identity keys the LLM cache: a rerun on the same cache asks nothing
    assert cached["code"] == 0 and again.read_text() == out.read_text()
    assert (
        json.loads(again.with_name(again.name + ".stats.json").read_text())["this_run_units"] == 0
    )
    # a setting the echo kind does not have: one located line, exit 2, nothing written
    assert wrong["code"] == 2 and not bad.exists()
    assert wrong["stderr"].strip() == (
        "error: command line: backend.n_ctx: not a setting of backend kind 'echo' "
        "(its settings: kind, model, prefix)"
    )
    # the benchmark, with its bundled data: BM25 ranks each gold document first
    assert evaluated["code"] == 0, evaluated["stderr"][-2000:]
    result = json.loads((tmp_path / "eval" / "bm25" / "first_hit.json").read_text())
    assert result["metrics"] == {"Hits@1": 1.0}
    assert result["per_query"]["Hits@1"] == {"q1": 1.0, "q2": 1.0, "q3": 1.0}
