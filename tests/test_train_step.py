"""One contrastive step: GradCache and 2-process (gloo) gathering equal the plain full batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.train.step import (
    Chunking,
    contrastive_step,
    shard_bounds,
)
from tests.helpers import on_two_gloo_ranks
from tests.step_checks import LOSSES, assert_same_step, run_step, step_batch
from tests.train_tiny import make_tiny_encoder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


def _model(path: Path) -> BiEncoder:
    model = BiEncoder(
        ModelConfig(name_or_path=str(path), query_max_length=32, document_max_length=48)
    )
    model.eval()  # no dropout: the two paths must see identical forward passes
    return model


def test_shard_bounds_cover_everything() -> None:
    for total in range(0, 12):
        spans = [shard_bounds(total, 3, r) for r in range(3)]
        assert [i for lo, hi in spans for i in range(lo, hi)] == list(range(total))


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_gradcache_equals_plain(tiny: Path, loss_name: str) -> None:
    model = _model(tiny)
    plain = run_step(model, loss_name, None)
    assert plain[0] > 0
    assert_same_step(run_step(model, loss_name, 2), plain)
    assert_same_step(run_step(model, loss_name, 5), plain)
    assert_same_step(run_step(model, loss_name, Chunking(max_tokens=200)), plain)  # token budget


def test_step_reports_real_and_padded_tokens(tiny: Path) -> None:
    model = _model(tiny)
    batch = step_batch()
    stats = contrastive_step(model, LOSSES["infonce"](), batch, chunk_size=Chunking(max_tokens=200))
    docs = model.tokenize_ids(batch.doc_texts, "document").lengths.tolist()
    queries = model.tokenize_ids(batch.query_texts, "query").lengths.tolist()
    assert sorted(stats.lengths) == sorted(docs + queries)
    assert stats.tokens <= stats.padded_tokens < 2 * stats.tokens + 8 * 64
    assert stats.gradcache


def test_step_reports_the_texts_gradcache_ran_twice(tiny: Path) -> None:
    """What HFU counts again: every text but those of the kept chunks (the documents are the
    last group; with a budget for all of them, only the queries run twice)."""
    model = _model(tiny)
    batch = step_batch()
    queries = sorted(model.tokenize_ids(batch.query_texts, "query").lengths.tolist())
    docs = model.tokenize_ids(batch.doc_texts, "document").lengths.tolist()
    loss = LOSSES["infonce"]()
    rerun = {}
    for name, retain_last, tokens in [("none", False, 0), ("last", True, 0), ("all", True, 10**9)]:
        chunking = Chunking(max_items=2, retain_last=retain_last, retain_tokens=tokens)
        rerun[name] = sorted(
            contrastive_step(model, loss, batch, chunk_size=chunking).rerun_lengths
        )
    assert rerun["none"] == sorted(queries + docs)
    assert rerun["all"] == queries
    assert len(rerun["last"]) == len(queries) + len(docs) - 2  # the last chunk: 2 documents
    assert contrastive_step(model, loss, batch).rerun_lengths == []  # no GradCache


CASES = [("infonce", None), ("inf_multi_P_I_IQ", 2)]


def _full_batch_results(tiny: str) -> list:
    """What each rank computes (rank 0's result is compared with one process)."""
    model = _model(Path(tiny))
    return [run_step(model, loss_name, chunk) for loss_name, chunk in CASES]


@pytest.mark.slow
def test_two_gloo_processes_equal_single_full_batch(tiny: Path, tmp_path: Path) -> None:
    """Each rank encodes half the batch; gathered loss and summed gradients = one process."""
    gathered = on_two_gloo_ranks(_full_batch_results, (str(tiny),), tmp_path)
    model = _model(tiny)
    for (loss_name, _), result in zip(CASES, gathered, strict=True):
        assert_same_step(result, run_step(model, loss_name, None))
