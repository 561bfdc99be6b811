from __future__ import annotations

import json

import pytest

from dualview.data.formats.beir import load_corpus, load_qrels
from dualview.errors import DualviewError
from dualview.eval.benchmarks import load_benchmark
from dualview.eval.benchmarks.paired import read_pairs
from dualview.eval.export import dual_view_pairs, export_followir, export_paired
from tests.helpers import doc, make_record


def _pairs():
    p, n1, n2, h = (
        doc(t, i) for t, i in [("pos", "p"), ("n one", "n1"), ("n two", "n2"), ("h", "h")]
    )
    orig = make_record(
        "o1",
        positives=[p],
        instruction_negatives=[n1, n2],
        hard_negatives=[h],
        meta={"constraint_type": "audience"},
    )
    dv = make_record(
        "o1-dv",
        view="dv",
        parent_id="o1",
        instruction="for experts",
        positives=[n1],
        instruction_negatives=[p, n2],
        hard_negatives=[h],
    )
    lonely = make_record("o2")
    return [orig, lonely, dv]


def test_pairs_need_a_dv():
    assert [(o.id, d.id) for o, d in dual_view_pairs(_pairs())] == [("o1", "o1-dv")]
    with pytest.raises(DualviewError, match="no orig record"):
        dual_view_pairs([make_record("x")])


def test_followir_export_layout(tmp_path):
    assert export_followir(_pairs(), tmp_path) == 1
    (query,) = [json.loads(x) for x in (tmp_path / "queries.jsonl").read_text().splitlines()]
    assert query == {
        "_id": "o1",
        "text": "what causes tides",
        "instruction_og": "explain it for children",
        "instruction_changed": "for experts",
    }
    assert load_qrels(tmp_path / "qrels_og" / "test.tsv") == {"o1": {"p": 1, "n1": 0, "n2": 0}}
    assert load_qrels(tmp_path / "qrels_changed" / "test.tsv") == {"o1": {"n1": 1, "p": 0}}
    (top,) = [json.loads(x) for x in (tmp_path / "top_ranked.jsonl").read_text().splitlines()]
    assert top["corpus-ids"] == ["p", "n1", "n2", "h"]
    (loaded,) = load_benchmark(f"followir={tmp_path}").sets
    assert loaded.qids == ["o1"] and loaded.candidates["o1"] == ["p", "n1", "n2", "h"]


def test_paired_export_layout(tmp_path):
    assert export_paired(_pairs(), tmp_path) == 1
    (row,) = [json.loads(x) for x in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert row["a"] == {
        "instruction": "explain it for children",
        "satisfying": ["p"],
        "violating": ["n1", "n2"],
    }
    assert row["b"] == {
        "instruction": "for experts",
        "satisfying": ["n1"],
        "violating": ["p", "n2"],
    }
    assert row["constraint"] == "audience"
    (pair,) = read_pairs(tmp_path / "pairs.jsonl", load_corpus(tmp_path / "corpus.jsonl"))
    assert (pair.pair_id, pair.constraint, pair.candidates) == ("o1", "audience", row["candidates"])
