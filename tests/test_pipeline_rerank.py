"""An experiment's eval stage evaluates a trained reranker over its first stage, beside the
bi-encoders, and the report finds the reranked column under the arm's label."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from dualview.models.config import ModelConfig
from dualview.models.cross_encoder import CrossEncoderReranker
from dualview.pipeline.build import eval_stage
from dualview.pipeline.experiment import Experiment
from dualview.pipeline.params import EvalParams
from dualview.report.run_report import rows_of_eval_stage
from tests.test_eval_rerank import write_pairs
from tests.train_tiny import make_tiny_encoder


def _experiment(pairs: Path, include_base: bool, interpolate: float = 1.0) -> Experiment:
    return Experiment.model_validate(
        {
            "name": "rerank-arm",
            "instructions": {"path": "gold:train", "views": ["orig", "dv"]},
            "mixes": [{"name": "Ins-orig", "preset": "ins-orig", "size": 4}],
            "training": {"base": "configs/train/minilm-cpu.yaml"},
            "evaluation": {
                "benchmarks": [f"paired={pairs}"],
                "include_base": include_base,
                "rerank": {"first_stage": "bm25", "top_k": 3, "interpolate": interpolate},
            },
        }
    )


def test_a_trained_reranker_is_evaluated_over_the_first_stage(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    tiny = make_tiny_encoder(tmp_path / "tiny")
    train_out = tmp_path / "train-ce"
    config = ModelConfig(kind="cross_encoder", name_or_path=str(tiny))
    CrossEncoderReranker(config).save(train_out / "model")
    bi_out = tmp_path / "train-bi"  # a bi-encoder arm beside it: evaluated alone
    shutil.copytree(tiny, bi_out / "model")
    exp = _experiment(write_pairs(tmp_path / "pairs"), include_base=False)
    out = tmp_path / "eval-stage"
    out.mkdir()

    trained = {"BI": "train-bi", "CE": "train-ce"}
    done = eval_stage(exp, trained, {})(out, {"train-bi": bi_out, "train-ce": train_out})

    models = json.loads((out / "configurations.json").read_text())["models"]
    assert models == {"BI": str(bi_out / "model"), "CE": f"{train_out / 'model'}@bm25"}
    [result_path] = (out / "eval").glob("*@bm25/paired.json")
    result = json.loads(result_path.read_text())
    assert result["rerank"]["top_k"] == 3 and result["rerank"]["first_stage"]["kind"] == "bm25"
    summary = json.loads((out / "eval" / "summary.json").read_text())
    assert summary["models"] == [models["BI"], models["CE"]]  # one summary of both calls
    assert done["benchmarks"] == ["paired"]
    rows = rows_of_eval_stage(out)
    assert [r.name for r in rows] == ["BI", "CE"]
    assert all("paired p-MRR" in r.metrics for r in rows)


def test_an_interpolated_reranker_is_one_column_under_the_arms_label(
    tmp_path: Path, monkeypatch
) -> None:
    """``evaluation.rerank.interpolate``: the arm's column is ``<reranker>~W@<first stage>``,
    its result records the weight, and the eval key holds it only below 1."""
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    train_out = tmp_path / "train-ce"
    config = ModelConfig(kind="cross_encoder", name_or_path=str(make_tiny_encoder(tmp_path / "t")))
    CrossEncoderReranker(config).save(train_out / "model")
    exp = _experiment(write_pairs(tmp_path / "pairs"), include_base=False, interpolate=0.4)
    out = tmp_path / "eval-stage"
    out.mkdir()
    eval_stage(exp, {"CE": "train-ce"}, {})(out, {"train-ce": train_out})
    models = json.loads((out / "configurations.json").read_text())["models"]
    assert models == {"CE": f"{train_out / 'model'}~0.4@bm25"}
    [result_path] = (out / "eval").glob("*_0.4@bm25/paired.json")
    assert json.loads(result_path.read_text())["rerank"]["weight"] == 0.4
    assert [r.name for r in rows_of_eval_stage(out)] == ["CE"]
    key = EvalParams.of(exp.evaluation, {}).key()["evaluation"]["rerank"]
    assert key["interpolate"] == 0.4
    plain = _experiment(tmp_path / "pairs", include_base=False)
    assert "interpolate" not in EvalParams.of(plain.evaluation, {}).key()["evaluation"]["rerank"]


def test_the_eval_stage_scores_its_reranker_in_evaluation_rerank_precision(
    tmp_path: Path, monkeypatch
) -> None:
    """``evaluation.rerank.precision``: the reranker scores in bf16 (its result's fingerprint
    is the bf16 model's), the key holds it only when not ``auto``, and a bad value is refused
    where the experiment is read."""
    from dualview.eval.two_stage import open_reranker

    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    train_out = tmp_path / "train-ce"
    config = ModelConfig(kind="cross_encoder", name_or_path=str(make_tiny_encoder(tmp_path / "t")))
    CrossEncoderReranker(config).save(train_out / "model")
    data = _experiment(write_pairs(tmp_path / "pairs"), include_base=False).model_dump()
    data["evaluation"]["rerank"]["precision"] = "bf16"
    exp = Experiment.model_validate(data)
    out = tmp_path / "eval-stage"
    out.mkdir()
    eval_stage(exp, {"CE": "train-ce"}, {})(out, {"train-ce": train_out})
    [result_path] = (out / "eval").glob("*@bm25/paired.json")
    scored = json.loads(result_path.read_text())["rerank"]["reranker"]["fingerprint"]
    folder = str(train_out / "model")
    assert scored == open_reranker(folder, "cpu", 8, False, "bf16").fingerprint
    assert scored != open_reranker(folder, "cpu", 8, False, "fp32").fingerprint
    assert EvalParams.of(exp.evaluation, {}).key()["evaluation"]["rerank"]["precision"] == "bf16"
    plain = _experiment(tmp_path / "pairs", include_base=False)
    assert "precision" not in EvalParams.of(plain.evaluation, {}).key()["evaluation"]["rerank"]
    data["evaluation"]["rerank"]["precision"] = "int8"
    with pytest.raises(ValidationError, match="precision"):
        Experiment.model_validate(data)
