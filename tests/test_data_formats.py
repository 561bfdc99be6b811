from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from dualview.data.formats import beir, infir, parquet, promptriever, st, tevatron
from dualview.data.schema import content_id
from dualview.errors import DataError
from tests.conftest import FIXTURES
from tests.helpers import make_record

FORMATS = FIXTURES / "formats"


def test_promptriever_instruct_row_is_split_field_by_field():
    orig, plain = list(promptriever.read(FORMATS / "promptriever.jsonl"))
    assert orig.view == "orig" and orig.id == "1185869-instruct"
    assert orig.query == "what causes tides in the ocean"
    assert orig.instruction.startswith("Focus on explanations written for primary school")
    assert [d.id for d in orig.positives] == ["7001"]
    assert orig.positives[0].title == "Why the sea goes in and out"
    # new_negatives -> instruction negatives; one has no docid -> content hash
    first_neg_text = (
        "The tide-generating acceleration is the difference between the lunar gravitational "
        "field at a point and at the Earth's centre, scaling as 2GMr/d^3, which yields two "
        "bulges and a semidiurnal period of 12.42 hours."
    )
    assert [d.id for d in orig.instruction_negatives] == [
        content_id(first_neg_text, "Tidal forcing and the equilibrium tide"),
        "7005",
    ]
    assert [d.id for d in orig.hard_negatives] == ["7002", "7003"]
    explanations = orig.meta["instruction_negative_explanations"]
    assert explanations["7005"] == "Written for engineers, not children."
    # link between the instruct row and its non-instruct counterpart, both ways
    assert orig.meta["counterpart_id"] == plain.id == "1185869"
    assert plain.view == "plain" and plain.instruction == ""
    assert plain.meta["counterpart_id"] == orig.id
    assert plain.positives == orig.positives


def test_tevatron_round_trip(tmp_path):
    records = list(tevatron.read(FORMATS / "tevatron.jsonl"))
    assert [r.id for r in records] == ["q1", "q2"]
    assert [d.id for d in records[0].hard_negatives] == ["d2", "d3"]
    out = tmp_path / "t.jsonl"
    tevatron.write(records, out)
    original = [json.loads(x) for x in (FORMATS / "tevatron.jsonl").read_text().splitlines()]
    written = [json.loads(x) for x in out.read_text().splitlines()]
    assert written == original


def test_tevatron_write_joins_instruction_and_orders_negatives(tmp_path):
    record = make_record()
    row = tevatron.to_row(record)
    assert row["query"] == "what causes tides explain it for children"
    assert [p["docid"] for p in row["negative_passages"]] == ["n1", "h1"]


def test_beir_folder_to_plain_records():
    records = list(beir.read(FORMATS / "beir-mini"))
    assert [(r.id, r.query, [d.id for d in r.positives]) for r in records] == [
        ("q1", "when to plant tomatoes", ["c1"]),
        ("q2", "how long to boil an egg", ["c2"]),
    ]
    assert all(r.view == "plain" for r in records)


def test_beir_missing_corpus_doc_is_located(tmp_path):
    folder = tmp_path / "b"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "c1", "text": "x"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n')
    (folder / "qrels" / "test.tsv").write_text("q1\tc9\t1\n")
    with pytest.raises(DataError, match="c9"):
        list(beir.read(folder))


def test_infir_row_gives_three_tuples():
    orig, inv, qneg = list(infir.read(FORMATS / "infir.jsonl"))
    p_pos, p1, p2 = orig.positives[0], orig.instruction_negatives[0], orig.hard_negatives[0]
    assert (orig.query, orig.instruction) == (
        "benefits of green tea",
        "Only consider randomized controlled trials in adults.",
    )
    assert p_pos.text.startswith("A randomized controlled trial of 240 adults")
    assert p1.text.startswith("In Tang dynasty China")
    assert p2.text.startswith("A randomized controlled trial in adults reported liver")
    assert inv.view == "dv" and inv.parent_id == orig.id
    assert inv.instruction.startswith("Only consider traditional")
    assert inv.positives == [p1] and inv.instruction_negatives == [p_pos]
    assert qneg.query == "risks of green tea" and qneg.positives == [p2]
    assert {d.id for d in qneg.hard_negatives} == {p_pos.id, p1.id}


def test_same_text_gets_same_id_across_adapters(tmp_path):
    text = "Plant tomato seedlings outdoors after the last spring frost."
    st_path = tmp_path / "st.jsonl"
    st_path.write_text(json.dumps({"anchor": "q", "positive": text, "negative_1": "other"}) + "\n")
    (record,) = st.read(st_path)
    assert record.positives[0].id == content_id(text)


def test_st_export_and_back(tmp_path):
    record = make_record()
    out = tmp_path / "st.jsonl"
    st.write([record], out)
    row = json.loads(out.read_text())
    assert row == {
        "anchor": "what causes tides explain it for children",
        "positive": "The Moon pulls the sea.",
        "negative_1": "Tidal forcing scales as 2GMr/d^3.",
        "negative_2": "Salt comes from rivers.",
    }
    (back,) = st.read(out)
    assert back.query == row["anchor"]
    assert [d.text for d in back.hard_negatives] == [row["negative_1"], row["negative_2"]]


def test_parquet_round_trip(tmp_path):
    records = [make_record("a", meta={"k": 1}), make_record("b", view="plain")]
    out = tmp_path / "train.parquet"
    assert parquet.write(records, out, batch_size=1) == 2
    assert pq.read_table(out).num_rows == 2
    assert list(parquet.read(out)) == records
