"""Distillation (issue 37 item 1): MarginMSE and listwise KL against hand computations, teacher
scores in the batch aligned with its pairs, teacher scores computed once (a second run makes
no teacher call; a killed scoring resumes), a cross-encoder distilled from a bi-encoder for a
few steps moves its margins toward the teacher's, and config checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from dualview.config import validate_config
from dualview.data.jsonl import iter_records
from dualview.errors import ConfigError
from dualview.models.cross_encoder import CrossEncoderReranker
from dualview.models.rerankers import load_reranker
from dualview.retrieval import rerank as rerank_module
from dualview.train.batching import build_batch, labelled_documents
from dualview.train.config import TrainConfig
from dualview.train.objectives import OBJECTIVES
from dualview.train.objectives.distill_kl import ListwiseKL
from dualview.train.objectives.distill_margin_mse import MarginMSE
from dualview.train.teacher import BiEncoderTeacher, training_teacher_scores
from dualview.train.trainer import train
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
TEMPLATE = "{query} {instruction}"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _config(tiny: Path, out: Path, objective: str = "distill_margin_mse", **loss) -> dict:
    return {
        "model": {
            "kind": "cross_encoder",
            "name_or_path": str(tiny),
            "query_max_length": 32,
            "document_max_length": 48,
        },
        "data": {"train_file": str(FIXTURE), "num_workers": 0},
        "loss": {"objective": objective, **loss},
        "optim": {"lr": 5e-3, "warmup_steps": 0},
        "output_dir": str(out),
        "batch_size": 4,
    }


def test_both_objectives_are_registered() -> None:
    assert {"distill_margin_mse", "distill_kl"} <= set(OBJECTIVES.names())


def test_margin_mse_matches_a_hand_computation() -> None:
    # record 0: positive 2.0 (teacher 0.9), negatives 1.0 (0.5) and -1.0 (0.1)
    # record 1: positive 0.5 (teacher 0.8), negative 0.0 (teacher 0.7), one padding slot
    scores = torch.tensor([[2.0, 1.0, -1.0], [0.5, 0.0, 9.0]])
    teacher = torch.tensor([[0.9, 0.5, 0.1], [0.8, 0.7, 9.0]])
    labels = torch.tensor([[1, -1, -1], [1, -1, 0]])
    terms = [(1.0 - 0.4) ** 2, (3.0 - 0.8) ** 2, (0.5 - 0.1) ** 2]
    expected = sum(terms) / 3
    assert float(MarginMSE()(scores, teacher, labels)) == pytest.approx(expected, rel=1e-6)


def _kl(student: list[float], teacher: list[float], tau: float) -> float:
    def softmax(values: list[float]) -> list[float]:
        weights = [math.exp(v / tau) for v in values]
        return [w / sum(weights) for w in weights]

    p, q = softmax(teacher), softmax(student)
    return sum(pk * (math.log(pk) - math.log(qk)) for pk, qk in zip(p, q, strict=True))


def test_listwise_kl_matches_a_hand_computation() -> None:
    scores = torch.tensor([[2.0, 1.0, -1.0], [0.5, 0.0, 9.0], [3.0, 0.0, 0.0]])
    teacher = torch.tensor([[0.9, 0.5, 0.1], [0.8, 0.7, -9.0], [0.2, 0.0, 0.0]])
    labels = torch.tensor([[1, -1, -1], [-1, 1, 0], [1, 0, 0]])  # record 2: one candidate
    tau = 0.5
    expected = (_kl([2.0, 1.0, -1.0], [0.9, 0.5, 0.1], tau) + _kl([0.5, 0.0], [0.8, 0.7], tau)) / 2
    loss = ListwiseKL(tau)(scores.requires_grad_(), teacher, labels)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert torch.isfinite(scores.grad).all() and float(scores.grad[1, 2]) == 0.0


def test_the_batch_carries_teacher_scores_in_pair_order() -> None:
    records = list(iter_records(FIXTURE))[:4]
    teacher = {
        (r.id, d.id): float(i * 100 + k)
        for i, r in enumerate(records)
        for k, (d, _) in enumerate(labelled_documents(r, 30))
    }
    batch = build_batch(records, 30, TEMPLATE, teacher)
    rows, cols = batch.pair_index()
    assert batch.teacher_scores is not None and len(batch.teacher_scores) == len(rows)
    for value, i, j in zip(
        batch.teacher_scores.tolist(), rows.tolist(), cols.tolist(), strict=True
    ):
        assert value == teacher[(records[i].id, batch.doc_ids[j])]
    del teacher[(records[1].id, records[1].positives[0].id)]
    with pytest.raises(ConfigError, match="no teacher score"):
        build_batch(records, 30, TEMPLATE, teacher)


class Killed(Exception):
    """Stands for a kill between two committed chunks."""


def _counting(monkeypatch: pytest.MonkeyPatch, fail_on: int | None = None) -> list[int]:
    calls: list[int] = []
    original = BiEncoderTeacher.score

    def score(self, queries, instructions, passages, batch_size=32):
        calls.append(len(queries))
        if len(calls) == fail_on:
            raise Killed  # once: the list is cleared before the run that resumes
        return original(self, queries, instructions, passages, batch_size)

    monkeypatch.setattr(BiEncoderTeacher, "score", score)
    return calls


def _scores(tiny: Path) -> dict:
    records = list(iter_records(FIXTURE))
    return training_teacher_scores(str(tiny), records, FIXTURE, 30, TEMPLATE, "cpu").scores


def test_a_second_run_makes_no_teacher_call(
    tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    first = _scores(tiny)
    pairs = sum(len(labelled_documents(r, 30)) for r in iter_records(FIXTURE))
    assert len(first) == pairs and sum(calls) == pairs
    calls.clear()
    assert _scores(tiny) == first
    assert calls == []
    assert len(list((cache / "teacher_scores").glob("*.sqlite"))) == 1


def test_a_killed_scoring_resumes_with_the_missing_pairs(
    tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(cache.parent / "fresh"))
    fresh = _scores(tiny)
    monkeypatch.setenv("DUALVIEW_CACHE", str(cache))
    monkeypatch.setattr(rerank_module, "CHUNK_SIZE", 8)
    calls = _counting(monkeypatch, fail_on=3)
    with pytest.raises(Killed):
        _scores(tiny)
    assert calls == [8, 8, 8]  # two chunks committed, the third lost
    calls[:] = [0] * 3  # the resumed run starts counting at 4: no second kill
    resumed = _scores(tiny)
    total = len(resumed)
    assert sum(calls) == total - 16 and len(calls) > 3
    assert resumed.keys() == fresh.keys()
    np.testing.assert_allclose([resumed[k] for k in fresh], list(fresh.values()), atol=1e-6)


def test_distillation_needs_a_teacher_and_only_distillation_takes_one(tiny: Path) -> None:
    with pytest.raises(ConfigError, match="distils from a teacher"):
        validate_config(TrainConfig, _config(tiny, Path("o")), "t")
    with pytest.raises(ConfigError, match="uses no teacher"):
        validate_config(TrainConfig, _config(tiny, Path("o"), "rerank_listwise", teacher="x"), "t")
    config = validate_config(TrainConfig, _config(tiny, Path("o"), "distill_kl", teacher="x"), "t")
    assert config.loss.temperature == 1.0  # the reranker default, as for rerank_*
    # inf_sets belongs to the InF-Embed objectives only: a distillation objective refuses it
    no_sets = _config(tiny, Path("o"), "distill_kl", teacher="x", inf_sets=[])
    with pytest.raises(ConfigError, match=r"t: loss\.inf_sets: objective 'distill_kl' uses no"):
        validate_config(TrainConfig, no_sets, "t")


def _margin_gap(model, teacher: dict) -> float:
    """MarginMSE between the margins of ``model`` (None: a student scoring every pair 0) and
    the teacher's, over the whole fixture."""
    batch = build_batch(list(iter_records(FIXTURE)), 30, TEMPLATE, teacher)
    logits = torch.zeros(len(batch.pair_index()[0]))
    if model is not None:
        tokens = model.tokenize_pairs(*batch.pair_texts())
        with torch.no_grad():
            logits = model.eval()(**model.pad_pairs(tokens, range(len(tokens))))
    return float(MarginMSE().batch_loss({"pairs": logits}, batch))


def test_a_distilled_cross_encoder_moves_toward_its_teacher(
    tiny: Path, tmp_path: Path, cache: Path
) -> None:
    settings = _config(tiny, tmp_path / "run", teacher=str(tiny))
    settings["epochs"] = 2
    config = validate_config(TrainConfig, settings, "t")
    torch.manual_seed(config.seed)
    initial = CrossEncoderReranker(config.model)
    result = train(config)
    teacher = _scores(tiny)
    losses = [json.loads(line)["loss"] for line in (tmp_path / "run" / "train_log.jsonl").open()]
    before = _margin_gap(initial, teacher)
    after = _margin_gap(load_reranker(result.model_dir, "cpu"), teacher)
    flat = _margin_gap(None, teacher)  # a student with no margins at all
    assert after < 0.7 * before and after < 0.7 * flat, (before, after, flat, losses)
