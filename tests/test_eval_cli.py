"""``dualview eval`` end to end with the embedded MiniLM on small fixtures, and evaluate()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.eval.run import EvalSettings, evaluate
from tests.helpers import run_cli

FIX = Path(__file__).resolve().parent / "fixtures" / "eval"


def test_cli_writes_results_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli(
        "eval",
        "embedded:minilm",
        "--benchmarks",
        f"beir={FIX / 'beir'}",
        "-b",
        f"paired={FIX / 'paired'}",
        "--out",
        str(out),
        env={"HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "nDCG@10" in result.stdout and "pairwise accuracy" in result.stdout
    payload = json.loads((out / "embedded_minilm" / "beir.json").read_text())
    assert payload["model"]["name"] == "embedded:minilm"
    assert len(payload["model"]["fingerprint"]) == 24
    assert len(payload["benchmark"]["data_fingerprint"]) == 24
    assert set(payload["per_query"]["nDCG@10"]) == {"q1", "q2"}
    assert 0.0 <= payload["metrics"]["nDCG@10"] <= 1.0
    assert payload["versions"]["sentence-transformers"] != "not installed"
    summary = (out / "summary.md").read_text()
    assert "| beir | nDCG@10 |" in summary and "| paired | p-MRR |" in summary


def test_bad_benchmark_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_cli("eval", "embedded:minilm", "-b", "nope=/x", "--out", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "unknown benchmark 'nope'" in result.stderr


@pytest.mark.slow  # three evaluations and a model save: ~40 s on a shared 2-core machine
def test_two_models_side_by_side_and_reuse(tmp_path: Path) -> None:
    from dualview.retrieval.encode import load_sentence_transformer

    model_dir = tmp_path / "copy"
    load_sentence_transformer("embedded:minilm", device="cpu").save(str(model_dir))
    specs = [f"beir={FIX / 'beir'}"]
    summary = evaluate(["embedded:minilm", str(model_dir)], specs, tmp_path / "out")
    assert summary.models == ["embedded:minilm", str(model_dir)]
    header = summary.table().splitlines()[0]
    assert "embedded:minilm" in header and str(model_dir) in header
    first, second = (summary.values[m]["beir"]["nDCG@10"] for m in summary.models)
    assert abs(first - second) < 1e-6  # same weights, same numbers
    path = summary.files[0]
    stamp = json.loads(path.read_text())["started_at"]
    path.touch()
    again = evaluate(["embedded:minilm"], specs, tmp_path / "out")
    assert json.loads(path.read_text())["started_at"] == stamp  # reused, not recomputed
    assert again.values["embedded:minilm"]["beir"] == summary.values["embedded:minilm"]["beir"]
    changed = evaluate(
        ["embedded:minilm"], specs, tmp_path / "out", settings=EvalSettings(query_prompt="q: ")
    )
    assert changed.values["embedded:minilm"]["beir"]["nDCG@10"] >= 0.0
    assert json.loads(path.read_text())["settings"]["query_prompt"] == "q: "


def test_precision_reaches_the_encoder_and_the_results(tmp_path: Path) -> None:
    """bf16 results carry their precision and a fingerprint of their own; fp32 is forced."""
    specs = [f"beir={FIX / 'beir'}"]
    half = evaluate(["embedded:minilm"], specs, tmp_path / "bf16", device="cpu", precision="bf16")
    full = evaluate(["embedded:minilm"], specs, tmp_path / "fp32", device="cpu", precision="fp32")
    models = [json.loads(s.files[0].read_text())["model"] for s in (half, full)]
    assert [m["precision"] for m in models] == ["bf16", "fp32"]
    assert models[0]["fingerprint"] != models[1]["fingerprint"]


def test_help_documents_precision_and_devices() -> None:
    from dualview.cli.options import split_devices

    result = run_cli("eval", "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0
    assert "--precision" in result.stdout and "force full precision" in result.stdout
    assert "--devices" in result.stdout
    assert split_devices(" cuda:0, cuda:1 ") == ["cuda:0", "cuda:1"]
    assert split_devices("") is None
