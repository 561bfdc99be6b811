from __future__ import annotations

import pytest
from pydantic import ValidationError

from dualview.data.schema import Document, Record, content_id
from tests.helpers import doc, make_record


def test_content_id_is_stable_and_content_sensitive():
    assert content_id("Some passage.", "T") == content_id("  Some passage. ", "T ")
    assert content_id("Some passage.", "T") != content_id("Some passage!", "T")
    assert content_id("x", "a") != content_id("x", "b")
    assert Document.from_text("abc").id == content_id("abc")
    assert Document.from_text("abc", id="given").id == "given"


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"query": "  "}, "query is empty"),
        ({"positives": []}, "at least one positive"),
        ({"view": "other"}, "view"),
        ({"instruction": ""}, "needs a non-empty instruction"),
        ({"hard_negatives": [doc("dup", "p1")]}, "appears twice"),
        ({"unknown_field": 1}, "Extra inputs"),
    ],
)
def test_invalid_records_are_rejected(changes, fragment):
    data = make_record().model_dump()
    data.update(changes)
    with pytest.raises(ValidationError) as info:
        Record.model_validate(data)
    assert fragment in str(info.value)


def test_dv_needs_parent_and_plain_may_lack_instruction():
    data = make_record(view="dv").model_dump()
    data["parent_id"] = None
    with pytest.raises(ValidationError, match="parent_id"):
        Record.model_validate(data)
    plain = make_record(view="plain")
    assert plain.instruction == ""


def test_negatives_order_and_json_roundtrip():
    record = make_record(meta={"source": "test"})
    assert [d.id for d in record.negatives()] == ["n1", "h1"]
    assert [d.id for d in record.documents()] == ["p1", "n1", "h1"]
    again = Record.model_validate(record.to_json_dict())
    assert again == record
    assert "meta" not in make_record().to_json_dict()
