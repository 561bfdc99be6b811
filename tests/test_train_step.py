"""One contrastive step: GradCache and 2-process (gloo) gathering equal the plain full batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dualview.data.jsonl import iter_records
from dualview.train.batching import build_batch
from dualview.train.config import ModelConfig
from dualview.train.losses import InfEmbedLoss, RelationInfoNCE
from dualview.train.model import BiEncoder
from dualview.train.step import (
    Chunking,
    all_reduce_gradients,
    contrastive_step,
    shard_bounds,
)
from tests.helpers import on_two_gloo_ranks
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
LOSSES = {
    "infonce": lambda: RelationInfoNCE(0.05),
    "infonce_inbatch": lambda: RelationInfoNCE(0.05, in_batch_negatives=True),
    "inf_multi_P_I_IQ": lambda: InfEmbedLoss(["P", "I", "IQ"], True, 0.05),
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


def _model(path: Path) -> BiEncoder:
    model = BiEncoder(
        ModelConfig(name_or_path=str(path), query_max_length=32, document_max_length=48)
    )
    model.eval()  # no dropout: the two paths must see identical forward passes
    return model


def _batch():
    return build_batch(list(iter_records(FIXTURE))[:4], 30, "{query} {instruction}")


def _run(model: BiEncoder, loss_name: str, chunk: int | Chunking | None) -> tuple[float, dict]:
    model.zero_grad(set_to_none=True)
    stats = contrastive_step(model, LOSSES[loss_name](), _batch(), chunk_size=chunk)
    all_reduce_gradients(model)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return stats.loss, grads


def _assert_same(a: tuple[float, dict], b: tuple[float, dict]) -> None:
    assert a[0] == pytest.approx(b[0], rel=1e-5)
    assert a[1].keys() == b[1].keys() and a[1]
    # float32 sums in a different order: compare against the scale of the whole gradient
    scale = max(float(g.abs().max()) for g in b[1].values())
    for name, grad in a[1].items():
        torch.testing.assert_close(grad, b[1][name], rtol=1e-4, atol=1e-4 * scale, msg=name)


def test_shard_bounds_cover_everything() -> None:
    for total in range(0, 12):
        spans = [shard_bounds(total, 3, r) for r in range(3)]
        assert [i for lo, hi in spans for i in range(lo, hi)] == list(range(total))


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_gradcache_equals_plain(tiny: Path, loss_name: str) -> None:
    model = _model(tiny)
    plain = _run(model, loss_name, None)
    assert plain[0] > 0
    _assert_same(_run(model, loss_name, 2), plain)
    _assert_same(_run(model, loss_name, 5), plain)
    _assert_same(_run(model, loss_name, Chunking(max_tokens=200)), plain)  # token budget


def test_step_reports_real_and_padded_tokens(tiny: Path) -> None:
    model = _model(tiny)
    batch = _batch()
    stats = contrastive_step(model, LOSSES["infonce"](), batch, chunk_size=Chunking(max_tokens=200))
    docs = model.tokenize_ids(batch.doc_texts, "document").lengths.tolist()
    queries = model.tokenize_ids(batch.query_texts, "query").lengths.tolist()
    assert sorted(stats.lengths) == sorted(docs + queries)
    assert stats.tokens <= stats.padded_tokens < 2 * stats.tokens + 8 * 64
    assert stats.gradcache


CASES = [("infonce", None), ("inf_multi_P_I_IQ", 2)]


def _full_batch_results(tiny: str) -> list:
    """What each rank computes (rank 0's result is compared with one process)."""
    model = _model(Path(tiny))
    return [_run(model, loss_name, chunk) for loss_name, chunk in CASES]


@pytest.mark.slow
def test_two_gloo_processes_equal_single_full_batch(tiny: Path, tmp_path: Path) -> None:
    """Each rank encodes half the batch; gathered loss and summed gradients = one process."""
    gathered = on_two_gloo_ranks(_full_batch_results, (str(tiny),), tmp_path)
    model = _model(tiny)
    for (loss_name, _), result in zip(CASES, gathered, strict=True):
        _assert_same(result, _run(model, loss_name, None))
