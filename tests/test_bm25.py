"""BM25 first stages (`dualview.data.bm25`): ``bm25`` is the `bm25s` library with its
published recipe (stemmed, English stop words), ``bm25-builtin`` the hand-written index.

The collections are a few hand-written passages, so every ranking can be checked by eye.
"""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
import Stemmer

from dualview.data.bm25 import BM25, BM25S, bm25_fingerprint, bm25_index
from dualview.data.schema import Document
from dualview.errors import DualviewError
from dualview.eval.benchmarks.base import FIRST_STAGES, EvalContext, retrieve
from dualview.eval.two_stage import RerankSettings
from dualview.pipeline.experiment import EvaluationSpec
from dualview.pipeline.params import EvalParams

DOCS = {
    "a": Document(id="a", text="apple pie recipe with apple"),
    "b": Document(id="b", title="Apple", text="orchard in the hills"),
    "c": Document(id="c", text="the garden of the house"),
    "d": Document(id="d", title="Motors", text="an engine runs on oil"),
}


def test_bm25_first_stage_matches_words_by_their_stem() -> None:
    """``engines running`` shares no exact word with passage d (``engine``, ``runs``): only
    a stemmed BM25 finds it; the hand-written one scores every passage 0 (ties by row)."""
    queries = {"q": "engines running"}
    stemmed = retrieve(EvalContext(first_stage="bm25"), queries, DOCS, 2)
    assert list(stemmed["q"]) == ["d", "a"] and stemmed["q"]["d"] > 0 == stemmed["q"]["a"]
    literal = retrieve(EvalContext(first_stage="bm25-builtin"), queries, DOCS, 2)
    assert literal["q"] == {"a": 0.0, "b": 0.0}


def test_bm25s_scores_are_the_library_s_own_retrieval() -> None:
    """Our wrapper gives the scores `bm25s` itself returns with its README recipe."""
    texts = [f"{d.title} {d.text}" for d in DOCS.values()]
    stem = Stemmer.Stemmer("english").stemWords
    reference = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    corpus_tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False)
    reference.index(corpus_tokens, show_progress=False)
    ours = BM25S(list(DOCS.values()))
    for query in ("apple pies", "engines running", "apple orchards in hills"):
        q = bm25s.tokenize(query, stopwords="en", stemmer=stem, show_progress=False)
        rows, scores = reference.retrieve(q, k=len(texts), show_progress=False)
        expected = np.zeros(len(texts), dtype=np.float32)
        expected[rows[0]] = scores[0]
        np.testing.assert_allclose(ours.scores(query), expected, rtol=1e-6)


@pytest.mark.parametrize("kind", ["bm25", "bm25-builtin"])
def test_queries_without_known_words_score_zero(kind: str) -> None:
    index = bm25_index(kind, list(DOCS.values()))
    stop_words_only = ["the of"] if kind == "bm25" else []  # the builtin keeps stop words
    for query in ("", "zebra", *stop_words_only):
        assert index.scores(query).tolist() == [0.0] * len(DOCS)
    assert bm25_index(kind, []).top_k("apple", 3)[1].tolist() == []


def test_the_builtin_stays_what_it_was_and_each_kind_has_its_fingerprint() -> None:
    builtin = bm25_index("bm25-builtin", list(DOCS.values()))
    assert isinstance(builtin, BM25) and (builtin.k1, builtin.b) == (1.2, 0.75)
    assert bm25_fingerprint("bm25-builtin") == "bm25:k1=1.2:b=0.75"  # results written before
    assert bm25_fingerprint("bm25") == f"bm25s-{bm25s.__version__}:lucene:k1=1.5:b=0.75" + (
        ":stem=english:stop=en"
    )
    assert {"bm25", "bm25-builtin"} <= set(FIRST_STAGES)


def test_an_unknown_first_stage_names_both_bm25_kinds() -> None:
    with pytest.raises(DualviewError, match="model, bm25, bm25-builtin, candidates"):
        RerankSettings(first_stage="bm25s").check([])


def _key(spec: EvaluationSpec) -> dict:
    return EvalParams.of(spec, {}).key()["evaluation"]


def test_an_experiment_with_the_bm25_first_stage_keys_its_evaluation_by_the_library() -> None:
    """A ``bm25`` evaluation stage cached when ``bm25`` was the hand-written index does not
    match today's key (it is rerun); other experiments keep their keys."""
    spec = {"benchmarks": ["phenomena"]}
    plain = _key(EvaluationSpec.model_validate(spec))
    assert "bm25" not in plain["rerank"]
    builtin = EvaluationSpec.model_validate({**spec, "rerank": {"first_stage": "bm25-builtin"}})
    assert "bm25" not in _key(builtin)["rerank"]
    library = EvaluationSpec.model_validate({**spec, "rerank": {"first_stage": "bm25"}})
    assert _key(library)["rerank"]["bm25"] == bm25_fingerprint("bm25")
