from __future__ import annotations

import pytest
from pydantic import ValidationError

from dualview.data.schema import Document, Record, content_id, is_blank
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


INVISIBLE = ["\u200b", "\u200c\u200d", "\u2060", "\ufeff", "\u00ad", "\u3164", "\u2800",
             " \u00a0\u3000\t\n", "\u200e\u202f", "\x00"]  # fmt: skip


@pytest.mark.parametrize("text", INVISIBLE)
def test_invisible_text_counts_as_blank(text):
    assert is_blank(text)
    assert is_blank("")


@pytest.mark.parametrize("text", ["a", "\u200bx\u200b", "0", "\u00e9", "\u4e2d", "-", "\U0001f600"])
def test_visible_text_is_not_blank(text):
    assert not is_blank(text)


@pytest.mark.parametrize("text", INVISIBLE)
@pytest.mark.parametrize("field", ["query", "instruction", "positives", "hard_negatives"])
def test_invisible_fields_are_rejected_like_empty_ones(field, text):
    data = make_record().model_dump()
    if field in ("positives", "hard_negatives"):
        data[field] = [{"id": "z9", "title": "", "text": text}]
        fragment = "document text is empty"
    else:
        data[field] = text
        fragment = f"{field} is empty" if field == "query" else "non-empty instruction"
    with pytest.raises(ValidationError) as info:
        Record.model_validate(data)
    assert fragment in str(info.value)


def test_zero_width_text_with_a_visible_character_is_kept():
    data = make_record().model_dump()
    data["query"] = "\u200bwhat causes tides\u200b"
    assert Record.model_validate(data).query == data["query"]
