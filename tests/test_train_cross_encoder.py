"""Training a cross-encoder (``model.kind: cross_encoder``) through the Trainer: the loss goes
down and the folder loads in sentence-transformers; GradCache and 2 gloo ranks give the plain
step's gradients; a killed run resumes to the uninterrupted run's weights; config checks."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file
from sentence_transformers import CrossEncoder

from dualview.config import load_config, validate_config
from dualview.data.jsonl import iter_records
from dualview.errors import ConfigError
from dualview.models.config import ModelConfig
from dualview.models.cross_encoder import CrossEncoderReranker
from dualview.models.rerankers import load_reranker
from dualview.train import rerank_step as rerank_step_module
from dualview.train.batching import build_batch
from dualview.train.config import TrainConfig
from dualview.train.objectives import build_objective
from dualview.train.rerank_step import rerank_step
from dualview.train.step import Chunking, all_reduce_gradients
from dualview.train.trainer import train
from tests.helpers import on_two_gloo_ranks
from tests.test_train_resume import _cmd, _env, _run_until
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
OBJECTIVES = ["rerank_bce", "rerank_listwise", "rerank_lambda"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


def _config(tiny: Path, out: Path, objective: str = "rerank_listwise", **extra) -> dict:
    return {
        "model": {
            "kind": "cross_encoder",
            "name_or_path": str(tiny),
            "query_max_length": 32,
            "document_max_length": 48,
        },
        "data": {"train_file": str(FIXTURE), "num_workers": 0},
        "loss": {"objective": objective},
        "optim": {"lr": 1e-3, "warmup_steps": 0},
        "output_dir": str(out),
        "batch_size": 4,
        **extra,
    }


def _model(path: Path) -> CrossEncoderReranker:
    torch.manual_seed(0)
    model = CrossEncoderReranker(
        ModelConfig(
            kind="cross_encoder",
            name_or_path=str(path),
            query_max_length=32,
            document_max_length=48,
        )
    )
    return model.eval()  # no dropout: compared paths must see identical forward passes


def _all_records_loss(model: CrossEncoderReranker, objective: str) -> float:
    batch = build_batch(list(iter_records(FIXTURE)), 30, model.template)
    tokens = model.tokenize_pairs(*batch.pair_texts())
    model.eval()
    with torch.no_grad():
        scores = model(**model.pad_pairs(tokens, range(len(tokens))))
    loss_fn = build_objective(
        validate_config(TrainConfig, _config(Path("x"), Path("y"), objective), "t").loss
    )
    return float(loss_fn.batch_loss({"pairs": scores}, batch))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_training_lowers_the_loss_and_saves_a_crossencoder_folder(
    tiny: Path, tmp_path: Path, objective: str
) -> None:
    settings = _config(tiny, tmp_path / "run", objective, epochs=4)
    settings["optim"]["lr"] = 5e-3  # 16 steps of a random 2-layer model
    config = validate_config(TrainConfig, settings, "test")
    assert config.loss.temperature == 1.0  # the reranker default, not the bi-encoder's 0.02
    torch.manual_seed(config.seed)
    initial = CrossEncoderReranker(config.model)
    result = train(config)
    assert result.steps == 16 and result.model_dir is not None
    trained = load_reranker(result.model_dir, "cpu")
    before = _all_records_loss(initial, objective)
    after = _all_records_loss(trained, objective)
    assert after < 0.9 * before, (before, after)
    records = list(iter_records(FIXTURE))[:3]
    passages = [r.positives[0].text for r in records]
    ours = trained.score([r.query for r in records], [r.instruction for r in records], passages)
    pairs = [(f"{r.query} {r.instruction}", p) for r, p in zip(records, passages, strict=True)]
    theirs = CrossEncoder(str(result.model_dir), device="cpu").predict(pairs)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert (result.model_dir / "dualview_train.yaml").is_file()


def _step(model: CrossEncoderReranker, chunk: int | Chunking | None):
    batch = build_batch(list(iter_records(FIXTURE))[:4], 30, model.template)
    loss_fn = build_objective(validate_config(TrainConfig, _config(Path("x"), Path("y")), "t").loss)
    model.zero_grad(set_to_none=True)
    stats = rerank_step(model, loss_fn, batch, chunk_size=chunk)
    all_reduce_gradients(model)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return stats.loss, grads


def assert_same_gradient(a, b) -> None:
    """Same loss; same gradient up to float32 summation order, as a whole vector (the
    listwise loss's head bias gets a sum of logit gradients that cancel to ~0, so entries
    near 0 differ by rounding at the logit-gradient scale)."""
    assert a[0] == pytest.approx(b[0], rel=1e-5)
    assert a[1].keys() == b[1].keys() and a[1]
    got = torch.cat([a[1][k].flatten() for k in sorted(a[1])])
    expected = torch.cat([b[1][k].flatten() for k in sorted(b[1])])
    assert float(expected.norm()) > 0
    # measured 5e-5 to 8e-5 (near-uniform logits: the gradient is a small difference of
    # float32 sums); a missing chunk or a wrong dropout replay is an O(1) error
    assert float((got - expected).norm() / expected.norm()) < 1e-3


def test_gradcache_equals_plain(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model(tiny)
    plain = _step(model, None)  # the 24 pairs fit in one chunk of 2048 tokens
    assert plain[0] > 0
    batch = build_batch(list(iter_records(FIXTURE))[:4], 30, model.template)
    tokens = model.tokenize_pairs(*batch.pair_texts())
    with torch.no_grad():  # one forward of every pair, padded together
        scores = model(**model.pad_pairs(tokens, range(len(tokens))))
    direct = build_objective(
        validate_config(TrainConfig, _config(Path("x"), Path("y")), "t").loss
    ).batch_loss({"pairs": scores}, batch)
    assert plain[0] == pytest.approx(float(direct), rel=1e-6)
    # without GradCache, CPU scores length-sorted chunks, each with its graph
    monkeypatch.setattr(rerank_step_module, "PLAIN_CPU_CHUNK_TOKENS", 200)
    assert_same_gradient(_step(model, None), plain)
    assert_same_gradient(_step(model, 3), plain)
    assert_same_gradient(_step(model, Chunking(max_tokens=200)), plain)


def _rank_step(tiny: str) -> list:
    model = _model(Path(tiny))
    return [_step(model, None), _step(model, 5)]


@pytest.mark.slow
def test_two_gloo_processes_equal_single_full_batch(tiny: Path, tmp_path: Path) -> None:
    """Each rank scores half of the pairs; gathered loss and summed gradients = one process."""
    gathered = on_two_gloo_ranks(_rank_step, (str(tiny),), tmp_path)
    plain = _step(_model(tiny), None)
    for result in gathered:
        assert_same_gradient(result, plain)


@pytest.mark.slow
def test_killed_run_resumes_to_identical_weights(tmp_path: Path) -> None:
    dropped = make_tiny_encoder(tmp_path / "tiny", dropout=0.1)  # dropout: RNG state matters
    config = _config(
        dropped,
        tmp_path / "unset",
        epochs=2,
        checkpoint_every=2,
        gradcache_chunk_size=16,
    )
    config["optim"]["warmup_steps"] = 2
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    # The straight run in a subprocess too: same thread count (OMP_NUM_THREADS=1) as the
    # killed run. The listwise loss gives the head's bias a gradient that cancels to ~0, and
    # AdamW turns its rounding noise (which depends on the summation order) into lr-sized steps.
    subprocess.run(_cmd(path, straight), env=_env(), check=True, capture_output=True)
    marker = broken / "checkpoints" / "step-00000004"
    code, out = _run_until(_cmd(path, broken), marker, signal.SIGKILL)
    assert code == -signal.SIGKILL, out
    assert not (broken / "model").exists(), "the run finished before it could be killed"
    resumed = train(load_config(TrainConfig, path, [f"output_dir={broken}"]), resume=True)
    assert resumed.steps == 8 and not resumed.interrupted
    expected = load_file(straight / "model" / "model.safetensors")
    got = load_file(broken / "model" / "model.safetensors")
    assert expected.keys() == got.keys() and "classifier.weight" in got
    assert max(float((expected[k] - got[k]).abs().max()) for k in expected) <= 1e-6


def test_objective_must_fit_the_model_kind(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs an objective that scores pairs"):
        validate_config(TrainConfig, _config(tiny, tmp_path, "infonce"), "test")
    bi = _config(tiny, tmp_path)
    bi["model"]["kind"] = "bi_encoder"
    with pytest.raises(ConfigError, match="trains rerankers"):
        validate_config(TrainConfig, bi, "test")
    explicit = _config(tiny, tmp_path)
    explicit["loss"]["temperature"] = 0.1
    assert validate_config(TrainConfig, explicit, "test").loss.temperature == 0.1
