"""Benchmark loaders on self-made fixtures in the upstream layouts, with hand-computed values.

A bag-of-words encoder (cosine of word counts) makes every score computable by hand; the
expected numbers in the comments follow from it.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from dualview.errors import DataError, DualviewError
from dualview.eval.benchmarks import load_benchmark, parse_spec, spec_label
from dualview.eval.benchmarks.base import EvalContext

FIX = Path(__file__).resolve().parent / "fixtures" / "eval"
RANK2 = 1 / math.log2(3)  # nDCG@k of one relevant document at rank 2


class BagOfWords:
    """Duck-typed :class:`~dualview.retrieval.encode.Encoder`: normalized word-count vectors."""

    fingerprint = "bow"
    dim = 256

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, texts, prompt=None, prompt_name=None, description=""):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, self.vocab.setdefault(word, len(self.vocab))] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


@pytest.fixture
def ctx() -> EvalContext:
    return EvalContext(encoder=BagOfWords(), backend="torch")  # type: ignore[arg-type]


def test_followir_p_mrr_and_score(ctx: EvalContext) -> None:
    result = load_benchmark(f"followir={FIX / 'followir'}").evaluate(ctx)
    m = result.metrics
    # Robust04: d1 rank 1 -> 3 under the changed instruction: 1 - 1/3.
    assert m["Robust04/p-MRR"] == pytest.approx(100 * (1 - 1 / 3))
    # og ranking d1, d3, d2, d4 with d1, d2 relevant: AP = (1 + 2/3) / 2.
    assert m["Robust04/Score"] == pytest.approx((1 + 2 / 3) / 2)
    # News21: e1 rank 1 -> 2: +50; nDCG@5 of the og run is 1 (e1 first); e4 is no candidate.
    assert m["News21/p-MRR"] == pytest.approx(50.0)
    assert m["News21/Score"] == pytest.approx(1.0)
    assert m["p-MRR"] == pytest.approx((100 * (2 / 3) + 50) / 2)
    assert m["Score"] == pytest.approx(((1 + 2 / 3) / 2 + 1) / 2)
    assert result.per_query["Robust04/p-MRR"] == {"q1": pytest.approx(100 * 2 / 3)}


def test_followir_subset_and_bad_candidate(tmp_path: Path, ctx: EvalContext) -> None:
    only = load_benchmark(f"followir:news21={FIX / 'followir'}").evaluate(ctx)
    assert set(only.metrics) >= {"News21/p-MRR", "p-MRR"}
    assert not any(k.startswith("Robust04") for k in only.metrics)
    broken = tmp_path / "robust04"
    shutil.copytree(FIX / "followir" / "robust04", broken)
    (broken / "top_ranked.jsonl").write_text('{"qid": "q1", "pid": "nope"}\n')
    with pytest.raises(DataError, match=r"top_ranked\.jsonl: pid: document 'nope'"):
        load_benchmark(f"followir={broken}")


def test_infosearch_per_dimension(ctx: EvalContext) -> None:
    result = load_benchmark(f"infosearch={FIX / 'infosearch'}").evaluate(ctx)
    m = result.metrics
    assert m["length/p-MRR"] == pytest.approx(50.0)  # l1: rank 1 -> 2
    assert m["keyword/p-MRR"] == pytest.approx(100 * (1 - 1 / 3))  # k2: rank 1 -> 3
    assert m["p-MRR"] == pytest.approx((50 + 100 * 2 / 3) / 2)
    assert m["length/instructed nDCG@10"] == pytest.approx(1.0)
    assert m["length/reversed nDCG@10"] == pytest.approx(1.0)


def test_mair_tasks_and_subsets(ctx: EvalContext) -> None:
    result = load_benchmark(f"mair={FIX / 'mair'}").evaluate(ctx)
    # IFEval: m1 finds r1 first (1.0), m2 ("history pasta") puts r1 second.
    assert result.metrics["IFEval/nDCG@10"] == pytest.approx((1 + RANK2) / 2)
    assert result.metrics["InstructIR/nDCG@10"] == pytest.approx(1.0)
    assert result.metrics["nDCG@10"] == pytest.approx(((1 + RANK2) / 2 + 1) / 2)
    only = load_benchmark(f"mair:IFEval={FIX / 'mair'}").evaluate(ctx)
    assert "InstructIR/nDCG@10" not in only.metrics
    with pytest.raises(DataError, match="no MAIR task 'Nope'"):
        load_benchmark(f"mair:Nope={FIX / 'mair'}")


def test_instructir_robustness(ctx: EvalContext) -> None:
    result = load_benchmark(f"instructir={FIX / 'instructir'}").evaluate(ctx)
    # 100_1 -> 1.0; 100_2 ("movie bank") puts p2 second; 200_1 -> 1.0
    assert result.per_query["nDCG@10"]["100_2"] == pytest.approx(RANK2)
    assert result.metrics["nDCG@10"] == pytest.approx((2 + RANK2) / 3)
    assert result.metrics["Robustness@10"] == pytest.approx((RANK2 + 1) / 2)
    assert result.per_query["Robustness@10"] == {"100": pytest.approx(RANK2), "200": 1.0}


def test_paired_metrics(ctx: EvalContext) -> None:
    result = load_benchmark(f"paired={FIX / 'paired'}").evaluate(ctx)
    m = result.metrics
    # p1 ranks as intended (+50 both ways), p2 follows the wrong keyword (-50 both ways).
    assert result.per_query["p-MRR"] == {
        "p1/a>b": pytest.approx(50.0),
        "p1/b>a": pytest.approx(50.0),
        "p2/a>b": pytest.approx(-50.0),
        "p2/b>a": pytest.approx(-50.0),
    }
    assert m["p-MRR"] == pytest.approx(0.0)
    assert m["pairwise accuracy"] == pytest.approx(50.0)
    assert m["length/p-MRR"] == pytest.approx(50.0)
    assert m["keyword/pairwise accuracy"] == pytest.approx(0.0)
    assert m["length/nDCG@10"] == pytest.approx(1.0)
    assert m["keyword/nDCG@10"] == pytest.approx(RANK2)
    assert m["nDCG@10"] == pytest.approx((2 + 2 * RANK2) / 4)


def test_paired_errors_name_line_and_field(tmp_path: Path) -> None:
    shutil.copy(FIX / "paired" / "corpus.jsonl", tmp_path / "corpus.jsonl")
    bad = {"pair_id": "x", "query": "q", "a": {"satisfying": ["zz"]}, "b": {"satisfying": ["c1"]}}
    (tmp_path / "pairs.jsonl").write_text("\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"pairs.jsonl:2: a.satisfying: 'zz' is not in corpus"):
        load_benchmark(f"paired={tmp_path}")


def test_beir_folder(ctx: EvalContext) -> None:
    result = load_benchmark(f"beir={FIX / 'beir'}").evaluate(ctx)
    # q1 finds b1 first; q2 ties b2/b3 at 0.5 and the higher id (b3) ranks first.
    assert result.metrics["nDCG@10"] == pytest.approx((1 + RANK2) / 2)
    assert result.metrics["MRR@10"] == pytest.approx(0.75)
    assert result.metrics["Recall@100"] == pytest.approx(1.0)


def test_spec_parsing_and_errors(tmp_path: Path) -> None:
    assert parse_spec("mair:IFEval,InstructIR=/x") == ("mair", ["IFEval", "InstructIR"], Path("/x"))
    assert parse_spec("followir") == ("followir", None, None)
    assert spec_label("mair:IFEval,InstructIR=/x") == "mair-IFEval+InstructIR"
    with pytest.raises(DualviewError, match="unknown benchmark 'nope'"):
        parse_spec("nope=/x")
    with pytest.raises(DualviewError, match="does not exist"):
        load_benchmark(f"beir={tmp_path / 'missing'}")
    with pytest.raises(DataError, match="no Hub set 'nope'"):
        load_benchmark("followir:nope")  # checked before any download


def test_data_fingerprint_follows_content(tmp_path: Path) -> None:
    shutil.copytree(FIX / "beir", tmp_path / "b")
    before = load_benchmark(f"beir={tmp_path / 'b'}").fingerprint()
    assert load_benchmark(f"beir={FIX / 'beir'}").fingerprint() == before
    with (tmp_path / "b" / "corpus.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "b9", "title": "", "text": "new"}) + "\n")
    assert load_benchmark(f"beir={tmp_path / 'b'}").fingerprint() != before
