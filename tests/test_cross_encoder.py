"""The cross-encoder reranker: sentence-transformers reads our folder and predicts our scores;
save/load round trip; bad folders give clear errors; pair token types."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import CrossEncoder

from dualview.data.formats.common import join_query_instruction
from dualview.errors import ConfigError
from dualview.models.config import ModelConfig
from dualview.models.cross_encoder import CrossEncoderReranker
from dualview.models.rerankers import RERANKER_FILE, build_reranker, load_reranker, reranker_kind
from dualview.models.tokens import tokenize_pairs

QUERIES = ["what causes tides", "effects of caffeine on sleep", "rust borrow checker"]
INSTRUCTIONS = ["explain it for children", "", "only compiler internals, " * 30]
PASSAGES = [
    "The Moon pulls the sea.",
    "Caffeine blocks adenosine receptors in the brain. " * 20,  # truncated with the query
    "Lifetimes are checked at compile time.",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[CrossEncoderReranker, Path]:
    """A MiniLM cross-encoder (new head, seed 0), short pairs so truncation is exercised."""
    torch.manual_seed(0)
    model = build_reranker(
        ModelConfig(kind="cross_encoder", query_max_length=32, document_max_length=48)
    )
    assert isinstance(model, CrossEncoderReranker) and model.max_length == 80
    folder = tmp_path_factory.mktemp("xenc") / "model"
    model.save(folder)
    return model, folder


def _pairs(model: CrossEncoderReranker) -> list[tuple[str, str]]:
    return [
        (join_query_instruction(q, i, model.template), p)
        for q, i, p in zip(QUERIES, INSTRUCTIONS, PASSAGES, strict=True)
    ]


def test_sentence_transformers_predict_gives_our_raw_logits(saved) -> None:
    model, folder = saved
    ours = model.score(QUERIES, INSTRUCTIONS, PASSAGES, batch_size=2)
    # The folder's activation is the identity: predict returns the raw logit, unsquashed.
    theirs = CrossEncoder(str(folder), device="cpu").predict(_pairs(model), batch_size=2)
    assert ours.dtype == np.float32 and ours.shape == (3,)
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)
    assert len(set(np.round(ours, 6))) == 3  # three different pairs, three different scores
    with torch.inference_mode():  # the squashed value would lie in (0, 1) for every pair
        assert not np.allclose(torch.sigmoid(torch.from_numpy(ours)).numpy(), theirs, atol=1e-3)


def test_save_load_round_trip(saved) -> None:
    model, folder = saved
    assert reranker_kind(folder) == "cross_encoder"
    info = json.loads((folder / RERANKER_FILE).read_text())
    assert info["query_template"] == "{query} {instruction}" and info["max_length"] == 80
    loaded = load_reranker(folder, "cpu")
    np.testing.assert_allclose(
        loaded.score(QUERIES, INSTRUCTIONS, PASSAGES),
        model.score(QUERIES, INSTRUCTIONS, PASSAGES),
        atol=1e-6,
    )
    assert loaded.fingerprint == model.fingerprint
    with torch.no_grad():
        next(loaded.parameters()).add_(1e-3)
    assert loaded.fingerprint != model.fingerprint


def test_score_is_independent_of_batching_and_order(saved) -> None:
    model, _ = saved
    one = model.score(QUERIES, INSTRUCTIONS, PASSAGES, batch_size=1)
    reversed_ = model.score(QUERIES[::-1], INSTRUCTIONS[::-1], PASSAGES[::-1], batch_size=3)
    np.testing.assert_allclose(one, reversed_[::-1], atol=1e-5)
    assert model.score([], [], []).shape == (0,)


def test_pair_token_types_match_the_tokenizer(saved) -> None:
    model, _ = saved
    firsts = [a for a, _ in _pairs(model)]
    tokens = tokenize_pairs(model.tokenizer, firsts, PASSAGES, 80)
    expected = model.tokenizer(
        firsts, PASSAGES, truncation="longest_first", max_length=80, padding=True
    )
    padded = tokens.pad(range(3), pad_id=0)
    width = len(expected["input_ids"][0])
    assert padded["input_ids"][:, :width].tolist() == expected["input_ids"]
    assert padded["token_type_ids"][:, :width].tolist() == expected["token_type_ids"]
    assert int(padded["token_type_ids"].sum()) > 0


def test_bad_folders_give_clear_errors(saved, tmp_path: Path) -> None:
    _, folder = saved
    with pytest.raises(ConfigError, match="not a dualview reranker folder"):
        load_reranker(tmp_path)
    broken = tmp_path / "no-weights"
    broken.mkdir()
    shutil.copy(folder / RERANKER_FILE, broken / RERANKER_FILE)
    with pytest.raises(ConfigError, match=f"{broken}: not a readable cross-encoder folder"):
        load_reranker(broken)
    partial = tmp_path / "no-length"
    shutil.copytree(folder, partial)
    (partial / RERANKER_FILE).write_text(json.dumps({"kind": "cross_encoder"}))
    with pytest.raises(ConfigError, match="field 'query_template'"):
        load_reranker(partial)


def test_bi_encoder_only_options_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"model\.interaction"):
        CrossEncoderReranker(ModelConfig(kind="cross_encoder", interaction="cross_attention"))


def test_cpu_scoring_pads_each_chunk_to_its_longest_pair(saved, monkeypatch) -> None:
    """On CPU a chunk is padded to its longest pair, not up to a multiple of 8, with the
    scores of the rounded-up padding (training's and CUDA's)."""
    model, _ = saved
    queries, passages = QUERIES[:2], ["The Moon pulls the sea.", "Caffeine keeps you awake."]
    firsts = [join_query_instruction(q, "", model.template) for q in queries]
    tokens = model.tokenize_pairs(firsts, passages)
    lengths = tokens.lengths.tolist()
    assert all(n % 8 for n in lengths)  # rounding up would add padding
    widths: list[int] = []
    forward = model.forward

    def recording(**inputs):
        widths.append(inputs["input_ids"].shape[1])
        return forward(**inputs)

    monkeypatch.setattr(model, "forward", recording)
    scores = model.score(queries, ["", ""], passages, batch_size=1)
    assert sorted(widths) == sorted(lengths)
    rounded = [model.pad_pairs(tokens, [i]) for i in range(2)]
    assert [inputs["input_ids"].shape[1] % 8 for inputs in rounded] == [0, 0]
    was_training = model.training
    model.eval()  # the fixture's model is fresh from build_reranker: training mode, dropout
    try:
        with torch.inference_mode():
            expected = [float(forward(**inputs)) for inputs in rounded]
    finally:
        model.train(was_training)
    np.testing.assert_allclose(scores, expected, atol=1e-5, rtol=0)
