"""Two-stage evaluation: a reranker over a first stage (a bi-encoder, BM25 or the benchmark's
candidates), its score cache, what the results record, and the ``dualview eval`` flags.

The rerankers here are small deterministic `Reranker` implementations (word overlap, a
table of scores), so every reranked order and metric can be worked out by hand.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dualview.data.bm25 import BM25
from dualview.data.schema import Document
from dualview.errors import DualviewError
from dualview.eval.benchmarks import load_benchmark
from dualview.eval.benchmarks.base import EvalContext, rerank, retrieve
from dualview.eval.run import evaluate
from dualview.eval.two_stage import RerankSettings
from dualview.models.kinds import MODEL_KINDS, CardFacts, SavedKind
from dualview.models.reranker import RERANKER_FILE, Reranker
from dualview.retrieval.rerank import CachedReranker, ranked, rerank_top_k
from tests.test_eval_benchmarks import BagOfWords

FIX = Path(__file__).resolve().parent / "fixtures" / "eval"


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class Overlap:
    """Score = shared words of (instruction + query) and passage, times ``sign``; counts calls
    and remembers every passage it scored."""

    def __init__(self, sign: float = 1.0, name: str | None = None) -> None:
        self.sign = sign
        self.name = name
        self.calls = 0
        self.seen: list[tuple[str, str, str]] = []

    @property
    def fingerprint(self) -> str:
        return f"overlap:{self.sign}"

    def score(
        self,
        queries: Sequence[str],
        instructions: Sequence[str],
        passages: Sequence[str],
        batch_size: int = 32,
    ) -> np.ndarray:
        self.calls += 1
        self.seen += list(zip(queries, instructions, passages, strict=True))
        return np.asarray(
            [
                self.sign * len(words(f"{i} {q}") & words(p))
                for q, i, p in zip(queries, instructions, passages, strict=True)
            ],
            dtype=np.float32,
        )


class Table:
    """Score = a fixed value per passage text (0 for any other)."""

    fingerprint = "table"

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def score(self, queries, instructions, passages, batch_size=32) -> np.ndarray:
        return np.asarray([self.values.get(p, 0.0) for p in passages], dtype=np.float32)


def _load_overlap(folder: Path, device: str | None) -> Reranker:
    info = json.loads((folder / RERANKER_FILE).read_text())
    return Overlap(sign=float(info["sign"]))


MODEL_KINDS.register(
    "test_overlap",
    SavedKind(
        "test_overlap",
        CardFacts("overlap", "text-ranking", (), ()),
        RERANKER_FILE,
        load=_load_overlap,
    ),
    replace=True,
)


def save_overlap(folder: Path, sign: float = 1.0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RERANKER_FILE).write_text(json.dumps({"kind": "test_overlap", "sign": sign}))
    return folder


def write_pairs(folder: Path) -> Path:
    """p1 searched over the corpus, p2 ranked within its candidates; the satisfying passage
    always shares the instruction's word, so BM25 on query + instruction gets every pair."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = {
        "c1": "caffeine effects short",
        "c2": "caffeine effects long",
        "c3": "unrelated",
        "c4": "battery life lithium",
        "c5": "battery life nickel",
        "c6": "battery",
    }
    lines = [json.dumps({"_id": d, "title": "", "text": t}) for d, t in docs.items()]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    pairs = [
        {
            "pair_id": "p1",
            "query": "caffeine effects",
            "a": {"instruction": "short", "satisfying": ["c1"], "violating": ["c2"]},
            "b": {"instruction": "long", "satisfying": ["c2"], "violating": ["c1"]},
        },
        {
            "pair_id": "p2",
            "query": "battery life",
            "a": {"instruction": "lithium", "satisfying": ["c4"], "violating": ["c5"]},
            "b": {"instruction": "nickel", "satisfying": ["c5"], "violating": ["c4"]},
            "candidates": ["c4", "c5", "c6"],
        },
    ]
    (folder / "pairs.jsonl").write_text("\n".join(json.dumps(p) for p in pairs) + "\n")
    return folder


# --- BM25 (moved to dualview.data.bm25, shared with the gold lexical check) ---------------


def test_bm25_ranks_the_collection_as_it_scores_each_passage() -> None:
    docs = [
        Document(id="a", text="apple pie recipe with apple"),
        Document(id="b", title="Apple", text="orchard"),
        Document(id="c", text="car engine oil"),
        Document(id="d", text="garden"),
    ]
    bm25 = BM25(docs)
    for query in ("apple pie", "engine", "nothing shared"):
        one_by_one = [bm25.score(query, d) for d in docs]
        np.testing.assert_allclose(bm25.scores(query), one_by_one, rtol=1e-6)
    scores, rows = bm25.top_k("apple pie", 3)
    assert rows.tolist() == [0, 1, 2] and scores[0] > scores[1] > 0 == scores[2]
    assert bm25.top_k("apple pie", 2)[1].tolist() == [0, 1]
    assert bm25.top_k("nothing shared", 2)[1].tolist() == [0, 1]  # all tied: lower rows first
    assert bm25.top_k("engine", 10)[1].tolist() == [2, 0, 1, 3]
    rng = np.random.default_rng(0)
    vocab = ["w" + "abcdefgh"[i] for i in range(8)]
    many = [Document(id=str(i), text=" ".join(rng.choice(vocab, 5))) for i in range(200)]
    big = BM25(many)
    for k in (1, 7, 50, 200):
        full = np.lexsort((np.arange(200), -big.scores("wa wb wc")))[:k]
        assert big.top_k("wa wb wc", k)[1].tolist() == full.tolist()


# --- the reranked run --------------------------------------------------------------------


def test_reranker_reverses_the_top_k_and_the_tail_keeps_first_stage_order() -> None:
    bench = load_benchmark(f"beir={FIX / 'beir'}")
    corpus, queries = bench.data.corpus, bench.data.queries  # type: ignore[attr-defined]
    for first_stage, encoder in (("bm25", None), ("model", BagOfWords())):
        first = retrieve(EvalContext(encoder=encoder, first_stage=first_stage), queries, corpus, 4)
        for qid, docs in first.items():
            order = ranked(docs)
            assert len(order) == 4
            # Scores rise down the first-stage order: the reranker reverses it.
            table = Table({corpus[d].text: float(i) for i, d in enumerate(order)})
            ctx = EvalContext(
                encoder=encoder,
                first_stage=first_stage,
                reranker=CachedReranker(table, cache=False),
                top_k=2,
            )
            again = retrieve(ctx, {qid: queries[qid]}, corpus, 4)
            assert ranked(again[qid]) == [order[1], order[0], order[2], order[3]]
            assert set(again[qid]) == set(docs)  # the tail stays, below the reranked top k


def test_rerank_top_k_reranks_each_query_once_and_keeps_ties_by_id() -> None:
    first = {"q": {"d1": 3.0, "d2": 2.0, "d3": 2.0, "d4": 1.0}}  # ties: higher id first
    reranker = Overlap()
    texts = {"d1": "x", "d2": "y", "d3": "alpha beta", "d4": "alpha"}
    new = rerank_top_k(first, {"q": "alpha beta"}, texts.__getitem__, CachedReranker(reranker), 2)
    assert sorted(p for _, _, p in reranker.seen) == ["alpha beta", "x"]  # d1 and d3 only
    assert ranked(new["q"]) == ["d3", "d1", "d2", "d4"]


def test_paired_metrics_on_the_reranked_run(tmp_path: Path) -> None:
    """BM25 on query + instruction gets every pair (p-MRR +50, accuracy 100); a reranker
    that reverses the top 2 turns each around (p-MRR -50, accuracy 0), both directions."""
    bench = load_benchmark(f"paired={write_pairs(tmp_path / 'pairs')}")
    alone = bench.evaluate(EvalContext(first_stage="bm25"))
    assert alone.metrics["p-MRR"] == pytest.approx(50.0)
    assert alone.metrics["pairwise accuracy"] == pytest.approx(100.0)
    reverse = CachedReranker(Overlap(sign=-1.0), cache=False)
    flipped = bench.evaluate(EvalContext(first_stage="bm25", reranker=reverse, top_k=2))
    assert flipped.per_query["p-MRR"] == pytest.approx(
        {"p1/a>b": -50.0, "p1/b>a": -50.0, "p2/a>b": -50.0, "p2/b>a": -50.0}
    )
    assert flipped.metrics["pairwise accuracy"] == pytest.approx(0.0)


def test_followir_reranks_its_top_ranked_whatever_the_first_stage() -> None:
    bench = load_benchmark(f"followir={FIX / 'followir'}")
    candidates = {s.name: s.candidates for s in bench.sets}  # type: ignore[attr-defined]
    reranker = Overlap()
    ctx = EvalContext(first_stage="bm25", reranker=CachedReranker(reranker, cache=False), top_k=1)
    bench.evaluate(ctx)
    for one in bench.sets:  # type: ignore[attr-defined]
        wanted = {one.corpus[d].text for q in one.qids for d in candidates[one.name][q]}
        scored = {p for q, _, p in reranker.seen if q in {one.queries[x]["text"] for x in one.qids}}
        assert scored == wanted  # every candidate (k=1 ignored), no document beyond them
    # News21's e4 is in the corpus but no candidate: never scored.
    news = next(s for s in bench.sets if s.name == "news21")  # type: ignore[attr-defined]
    assert news.corpus["e4"].text not in {p for _, _, p in reranker.seen}


def test_candidates_first_stage_needs_candidate_lists(tmp_path: Path) -> None:
    ctx = EvalContext(first_stage="candidates", reranker=CachedReranker(Overlap(), cache=False))
    bench = load_benchmark(f"beir={FIX / 'beir'}")
    with pytest.raises(DualviewError, match="no candidate lists"):
        bench.evaluate(ctx)
    corpus = {d: Document(id=d, text=t) for d, t in (("x", "alpha"), ("y", "beta"))}
    run = rerank(ctx, {"q": "beta"}, corpus, {"q": ["x", "y"]})
    assert ranked(run["q"]) == ["y", "x"]
    with pytest.raises(DualviewError, match="needs a reranker"):
        EvalContext(first_stage="candidates")


# --- evaluate(): names, records, reuse, cache --------------------------------------------


def test_result_json_records_the_stages_and_reuse_follows_them(tmp_path: Path) -> None:
    pairs = write_pairs(tmp_path / "pairs")
    specs = [f"paired={pairs}", f"followir={FIX / 'followir'}"]
    reranker = Overlap(name="overlap")
    settings = RerankSettings(rerankers=[reranker], first_stage="bm25", top_k=2)
    summary = evaluate([], specs, tmp_path / "out", rerank=settings)
    assert summary.models == ["overlap@bm25"]
    paired = json.loads((tmp_path / "out" / "overlap@bm25" / "paired.json").read_text())
    assert paired["model"]["name"] == "overlap@bm25"
    assert paired["rerank"]["reranker"] == {"name": "overlap", "fingerprint": "overlap:1.0"}
    assert paired["rerank"]["first_stage"]["kind"] == "bm25"
    assert paired["rerank"]["top_k"] == 2
    followir = json.loads((tmp_path / "out" / "overlap@bm25" / "followir.json").read_text())
    assert followir["rerank"]["first_stage"]["kind"] == "candidates"
    assert followir["rerank"]["top_k"] is None
    mteb_dir = tmp_path / "out" / "mteb" / "overlap@bm25" / "no_revision_available"
    task = json.loads((mteb_dir / "Robust04InstructionRetrieval.json").read_text())
    assert task["dualview_rerank"] == followir["rerank"]
    assert (
        json.loads((mteb_dir / "model_meta.json").read_text())["dualview_rerank"]["top_k"] is None
    )

    calls = reranker.calls
    evaluate([], specs, tmp_path / "out", rerank=settings)
    assert reranker.calls == calls  # both results reused: nothing scored, not even cached
    stamp = paired["started_at"], followir["started_at"]
    wider = RerankSettings(rerankers=[reranker], first_stage="bm25", top_k=3)
    evaluate([], specs, tmp_path / "out", rerank=wider)
    again = json.loads((tmp_path / "out" / "overlap@bm25" / "paired.json").read_text())
    assert again["rerank"]["top_k"] == 3  # another k: recomputed
    assert again["model"]["fingerprint"] != paired["model"]["fingerprint"]
    kept = json.loads((tmp_path / "out" / "overlap@bm25" / "followir.json").read_text())
    assert (again["started_at"], kept["started_at"])[1] == stamp[1]  # FollowIR: k unused


def test_scores_are_cached_per_reranker_fingerprint(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    specs = [f"paired={write_pairs(tmp_path / 'pairs')}", f"beir={FIX / 'beir'}"]
    first = Overlap()
    one = evaluate([], specs, tmp_path / "a", rerank=RerankSettings([first], "bm25", 3))
    assert first.calls > 0
    files = list((tmp_path / "cache" / "rerank_scores").glob("*.sqlite"))
    assert len(files) == 1
    second = Overlap()  # same fingerprint, fresh object, fresh output folder
    two = evaluate([], specs, tmp_path / "b", rerank=RerankSettings([second], "bm25", 3))
    assert second.calls == 0  # every score read back from the cache
    assert two.values["Overlap@bm25"] == one.values["Overlap@bm25"]
    other = Overlap(sign=-1.0)  # another fingerprint: its own store, scored afresh
    evaluate([], specs, tmp_path / "c", rerank=RerankSettings([other], "bm25", 3))
    assert other.calls > 0
    assert len(list((tmp_path / "cache" / "rerank_scores").glob("*.sqlite"))) == 2
    uncached = Overlap()
    evaluate([], specs, tmp_path / "d", rerank=RerankSettings([uncached], "bm25", 3), cache=False)
    assert uncached.calls > 0


def test_bad_reranker_folders_and_combinations_fail_before_any_work(tmp_path: Path) -> None:
    spec = [f"beir={FIX / 'beir'}"]
    with pytest.raises(DualviewError, match="reranker folder does not exist"):
        evaluate([], spec, tmp_path / "o", rerank=RerankSettings([str(tmp_path / "nope")], "bm25"))
    bi_encoder = tmp_path / "bi"
    bi_encoder.mkdir()
    (bi_encoder / "config.json").write_text("{}")
    with pytest.raises(DualviewError, match="not a reranker folder"):
        evaluate([], spec, tmp_path / "o", rerank=RerankSettings([str(bi_encoder)], "bm25"))
    with pytest.raises(DualviewError, match="uses no model"):
        evaluate(["embedded:minilm"], spec, tmp_path / "o", rerank=RerankSettings([], "bm25"))
    with pytest.raises(DualviewError, match="name at least one MODEL"):
        evaluate([], spec, tmp_path / "o", rerank=RerankSettings([Overlap()], "model"))
    with pytest.raises(DualviewError, match="two rerankers named 'Overlap'"):
        evaluate([], spec, tmp_path / "o", rerank=RerankSettings([Overlap(), Overlap(-1)], "bm25"))
    with pytest.raises(DualviewError, match="top-k"):
        evaluate([], spec, tmp_path / "o", rerank=RerankSettings([Overlap()], "bm25", 0))
    assert not (tmp_path / "o").exists()


# --- the CLI -----------------------------------------------------------------------------


def test_cli_reranks_a_saved_reranker_over_bm25(tmp_path: Path) -> None:
    from dualview.cli import app

    folder = save_overlap(tmp_path / "rr", sign=-1.0)
    out = tmp_path / "out"
    pairs = write_pairs(tmp_path / "pairs")
    args = ["eval", "-b", f"paired={pairs}", "-o", str(out), "--reranker", str(folder)]
    result = CliRunner().invoke(app, [*args, "--first-stage", "bm25", "--top-k", "2"])
    assert result.exit_code == 0, result.output
    name = f"{folder}@bm25"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["models"] == [name]
    assert summary["values"][name]["paired"]["p-MRR"] == pytest.approx(-50.0)
    files = list(out.glob("*@bm25/paired.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["rerank"]["top_k"] == 2

    missing = ["--reranker", str(tmp_path / "missing"), "--first-stage", "bm25"]
    bad = CliRunner().invoke(app, ["eval", "-b", f"paired={pairs}", "-o", str(out), *missing])
    assert isinstance(bad.exception, DualviewError)  # main() prints it as one line, exit 2
    assert "reranker folder does not exist" in str(bad.exception)
    precision = ["--reranker", str(folder), "--first-stage", "bm25", "--reranker-precision", "q4"]
    bad = CliRunner().invoke(
        app, ["eval", "-b", f"paired={pairs}", "-o", str(tmp_path / "q"), *precision]
    )
    assert isinstance(bad.exception, DualviewError)
    assert "--reranker-precision: one of auto, fp32, fp16, bf16, not 'q4'" in str(bad.exception)
    assert not (tmp_path / "q").exists()  # refused before any work


def test_cli_reranks_a_bi_encoders_top_k(tmp_path: Path) -> None:
    """First stage ``model``: the embedded MiniLM; the column is ``<reranker>@<model>``."""
    from dualview.cli import app

    folder = save_overlap(tmp_path / "rr")
    out = tmp_path / "out"
    args = ["eval", "embedded:minilm", "-b", f"beir={FIX / 'beir'}", "-o", str(out)]
    result = CliRunner().invoke(app, [*args, "--reranker", str(folder), "--top-k", "3"])
    assert result.exit_code == 0, result.output
    [path] = out.glob("*@embedded_minilm/beir.json")
    payload = json.loads(path.read_text())
    assert payload["model"]["name"] == f"{folder}@embedded:minilm"
    first = payload["rerank"]["first_stage"]
    assert first["kind"] == "model" and first["name"] == "embedded:minilm"
    assert len(first["fingerprint"]) == 24 and payload["rerank"]["top_k"] == 3
    # q1: b1 shares two words, first. q2 "car engine": b2 and b3 share one word each, the
    # tie goes to the higher id (b3), so the relevant b2 is second: nDCG 1/log2(3).
    assert payload["metrics"]["nDCG@10"] == pytest.approx((1 + 1 / math.log2(3)) / 2)


@pytest.mark.parametrize(
    "spec",
    [
        f"beir={FIX / 'beir'}",
        f"instructir={FIX / 'instructir'}",
        f"infosearch={FIX / 'infosearch'}",
        f"mair={FIX / 'mair'}",
        f"paired={FIX / 'paired'}",
        "phenomena",
    ],
)
def test_every_first_stage_benchmark_reranks_through_the_first_stage(spec: str) -> None:
    """Reranking only the top 1 cannot change an order: the metrics are the first stage's,
    though the reranker scored exactly one passage per ranked query."""
    bench = load_benchmark(spec)
    alone = bench.evaluate(EvalContext(first_stage="bm25"))
    reranker = Overlap(sign=-1.0)
    ctx = EvalContext(first_stage="bm25", reranker=CachedReranker(reranker, cache=False), top_k=1)
    reranked = bench.evaluate(ctx)
    assert reranked.metrics == pytest.approx(alone.metrics, nan_ok=True)
    assert reranker.calls > 0
    top2 = Overlap(sign=-1.0)
    ctx = EvalContext(first_stage="bm25", reranker=CachedReranker(top2, cache=False), top_k=2)
    bench.evaluate(ctx)
    assert len(top2.seen) == 2 * len(reranker.seen)  # two passages per query instead of one


# --- a real sentence-transformers CrossEncoder behind a small adapter ---------------------


class CrossEncoderAdapter:
    """The `Reranker` contract over ``sentence_transformers.CrossEncoder`` (query text =
    ``query instruction``), counting ``predict`` calls."""

    def __init__(self, folder: Path) -> None:
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(str(folder), device="cpu")
        self.fingerprint = f"st-cross-encoder:{folder}"
        self.calls = 0

    def score(self, queries, instructions, passages, batch_size=32) -> np.ndarray:
        self.calls += 1
        pairs = [
            (f"{q} {i}".strip(), p) for q, i, p in zip(queries, instructions, passages, strict=True)
        ]
        return self.predict(pairs, batch_size)

    def predict(self, pairs, batch_size=32) -> np.ndarray:
        out = self.model.predict(pairs, batch_size=batch_size, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


def make_tiny_cross_encoder(folder: Path) -> Path:
    """A 2-layer, 32-dim BERT with a one-logit head (fixed seed) and MiniLM's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from dualview.resources import embedded_encoder_path

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_encoder_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
        initializer_range=0.5,  # spread the random scores: no near-ties
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_sentence_transformers_cross_encoder_reranks_and_is_cached(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    adapter = CrossEncoderAdapter(make_tiny_cross_encoder(tmp_path / "ce"))
    bench = load_benchmark(f"beir={FIX / 'beir'}")
    corpus, queries = bench.data.corpus, bench.data.queries  # type: ignore[attr-defined]
    first = retrieve(EvalContext(first_stage="bm25"), queries, corpus, 4)
    ctx = EvalContext(first_stage="bm25", reranker=CachedReranker(adapter), top_k=3)
    run = retrieve(ctx, queries, corpus, 4)
    for qid, docs in first.items():
        head, tail = ranked(docs)[:3], ranked(docs)[3:]
        predicted = adapter.predict([(queries[qid], corpus[d].text) for d in head])
        by_model = [d for _, d in sorted(zip(predicted.tolist(), head, strict=True), reverse=True)]
        assert ranked(run[qid]) == by_model + tail
        np.testing.assert_allclose([run[qid][d] for d in head], predicted, rtol=1e-5)
    calls = adapter.calls
    again = retrieve(
        EvalContext(first_stage="bm25", reranker=CachedReranker(adapter), top_k=3),
        queries,
        corpus,
        4,
    )
    assert adapter.calls == calls and again == run  # read back from the cache


def test_bm25_alone_is_a_column_of_its_own(tmp_path: Path) -> None:
    pairs = write_pairs(tmp_path / "pairs")
    summary = evaluate([], [f"paired={pairs}"], tmp_path / "out", rerank=RerankSettings([], "bm25"))
    assert summary.models == ["bm25"]
    assert summary.values["bm25"]["paired"]["p-MRR"] == pytest.approx(50.0)  # as worked out
    payload = json.loads((tmp_path / "out" / "bm25" / "paired.json").read_text())
    assert payload["rerank"]["reranker"] is None and payload["rerank"]["top_k"] is None
    # ``bm25`` is the bm25s library (stemmed); the hand-written one is ``bm25-builtin``
    assert payload["rerank"]["first_stage"]["fingerprint"].startswith("bm25s-")


# --- end to end: a saved dualview cross-encoder through `dualview eval --reranker` -------


class Counting:
    """A loaded reranker, its calls counted."""

    def __init__(self, inner: Reranker) -> None:
        self.inner, self.calls = inner, 0
        self.name = "counting"

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def score(self, queries, instructions, passages, batch_size=32) -> np.ndarray:
        self.calls += 1
        return self.inner.score(queries, instructions, passages, batch_size)


@pytest.mark.slow  # a CLI subprocess loading torch and a model: ~20 s alone, 90 s under load
def test_dualview_eval_reranks_with_a_saved_cross_encoder(tmp_path: Path, monkeypatch) -> None:
    """The CLI (a fresh process: the kind is found through `load_reranker`'s registry) reranks
    BM25's top 3 with a tiny cross-encoder; the library gives the same numbers from the
    score cache the CLI filled, without calling the model."""
    import torch

    from dualview.models.config import ModelConfig
    from dualview.models.cross_encoder import CrossEncoderReranker
    from dualview.models.rerankers import load_reranker
    from tests.helpers import run_cli
    from tests.train_tiny import make_tiny_encoder

    cache = tmp_path / "cache"
    monkeypatch.setenv("DUALVIEW_CACHE", str(cache))
    torch.manual_seed(0)
    tiny = make_tiny_encoder(tmp_path / "tiny")
    folder = CrossEncoderReranker(ModelConfig(kind="cross_encoder", name_or_path=str(tiny))).save(
        tmp_path / "ce"
    )
    specs = [f"paired={write_pairs(tmp_path / 'pairs')}", f"followir={FIX / 'followir'}"]
    out = tmp_path / "out"
    bench_args = [a for s in specs for a in ("-b", s)]
    result = run_cli(
        "eval",
        *bench_args,
        "-o",
        str(out),
        "--reranker",
        str(folder),
        "--first-stage",
        "bm25",
        "--top-k",
        "3",
        env={"DUALVIEW_CACHE": str(cache)},
    )
    assert result.returncode == 0, result.stderr
    [paired_path] = out.glob("*@bm25/paired.json")
    paired = json.loads(paired_path.read_text())
    loaded = load_reranker(folder, "cpu")
    assert paired["rerank"]["reranker"]["fingerprint"] == loaded.fingerprint
    assert paired["rerank"]["top_k"] == 3
    counted = Counting(loaded)
    summary = evaluate(
        [], specs, tmp_path / "again", rerank=RerankSettings([counted], "bm25", 3), device="cpu"
    )
    assert counted.calls == 0  # every score came from the cache the CLI wrote
    cli = json.loads((out / "summary.json").read_text())["values"][f"{folder}@bm25"]
    assert set(cli) == {"paired", "followir"}
    for label, metrics in cli.items():
        assert summary.values["counting@bm25"][label] == pytest.approx(metrics)


# --- the score cache under faults ---------------------------------------------------------


class Failing(Overlap):
    """Overlap that raises on its ``fail_at``-th call (a kill in the middle of reranking)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at = fail_at

    def score(self, queries, instructions, passages, batch_size=32) -> np.ndarray:
        if self.calls + 1 == self.fail_at:
            self.calls += 1
            raise KeyboardInterrupt
        return super().score(queries, instructions, passages, batch_size)


def test_an_interrupted_reranking_resumes_from_its_committed_chunks(
    tmp_path: Path, monkeypatch
) -> None:
    import dualview.retrieval.rerank as rerank_module

    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(rerank_module, "CHUNK_SIZE", 2)
    queries = [f"query {i}" for i in range(7)]
    passages = [f"passage {i} query" for i in range(7)]
    blanks = [""] * 7
    with pytest.raises(KeyboardInterrupt):
        CachedReranker(Failing(fail_at=3)).score(queries, blanks, passages)  # 2 chunks kept
    resumed = Overlap()
    scores = CachedReranker(resumed).score(queries, blanks, passages)
    assert resumed.calls == 2 and len(resumed.seen) == 3  # only the 3 pairs never stored
    expected = CachedReranker(Overlap(), cache=False).score(queries, blanks, passages)
    np.testing.assert_array_equal(scores, expected)


def test_a_damaged_score_cache_is_moved_aside_and_rescored(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    first = CachedReranker(Overlap())
    first.score(["q"], ["i"], ["q i p"])
    path = first.cache.path
    first.close()
    assert path.parent.name == "rerank_scores"
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"not a database" * 100)
    again = Overlap()
    assert CachedReranker(again).score(["q"], ["i"], ["q i p"]).tolist() == [2.0]  # q, i
    assert again.calls == 1 and Path(f"{path}.damaged").exists()
    assert "damaged reranker score cache" in capsys.readouterr().err
