"""The training record: the one data contract every stage reads and writes.

A record is one query with its labelled documents. ``view`` says where it came from:

- ``orig``: an instruction-bearing instance as found (or seeded),
- ``dv``: its dual view, written by polarity reversal; ``parent_id`` names the ``orig``,
- ``plain``: a query without instruction (e.g. MS MARCO qrels, Promptriever non-instruct rows).

Documents carry an ``id`` that batching de-duplicates on, so the same passage must carry the
same id everywhere. When a source has no id, `content_id` derives one from the text.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

View = Literal["orig", "dv", "plain"]
VIEWS: tuple[str, ...] = ("orig", "dv", "plain")
DOC_LISTS: tuple[str, ...] = ("positives", "instruction_negatives", "hard_negatives")


# Characters that print as nothing although Unicode files them as letters or symbols
# (Hangul fillers, the blank braille pattern).
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# Separators (Zs, Zl, Zp), controls (Cc) and format characters (Cf: zero-width space/joiners,
# word joiner, BOM, soft hyphen, bidi marks, ...).
_BLANK_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: it is empty, or every character is whitespace, a
    separator, a control or format character (U+200B-U+200D, U+2060, U+FEFF, ...), or one of
    the few letters that render blank (Hangul fillers, U+2800). Such a text is treated as empty.
    """
    return all(
        ch.isspace() or ch in _INVISIBLE_LETTERS or unicodedata.category(ch) in _BLANK_CATEGORIES
        for ch in text
    )


def content_id(text: str, title: str = "") -> str:
    """Stable id of a passage from its content: the same title+text always gives the same id.

    Whitespace at the ends is ignored so that adapters which strip and adapters which don't agree.
    """
    payload = f"{title.strip()}\n{text.strip()}".encode()
    return "h" + hashlib.sha256(payload).hexdigest()[:20]


class Document(BaseModel):
    """A passage: ``{"id", "title", "text"}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    title: str = ""
    text: str = Field(min_length=1)

    @classmethod
    def from_text(cls, text: str, title: str = "", id: str | None = None) -> Document:
        """Build a document, deriving the id from the content when ``id`` is missing or empty."""
        return cls(id=id or content_id(text, title), title=title or "", text=text)

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        if is_blank(value):
            raise ValueError("document text is empty (only whitespace or invisible characters)")
        return value


class Record(BaseModel):
    """One training instance (orig, dv or plain). See module docstring."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    parent_id: str | None = None
    view: View
    query: str
    instruction: str = ""
    positives: list[Document]
    instruction_negatives: list[Document] = Field(default_factory=list)
    hard_negatives: list[Document] = Field(default_factory=list)
    # Provenance that is not part of the contract (source row, counterpart id, N* id, ...).
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if is_blank(value):
            raise ValueError("query is empty (only whitespace or invisible characters)")
        return value

    @field_validator("positives")
    @classmethod
    def _has_positive(cls, value: list[Document]) -> list[Document]:
        if not value:
            raise ValueError("a record needs at least one positive")
        return value

    @model_validator(mode="after")
    def _check_views_and_ids(self) -> Record:
        if self.view == "dv" and not self.parent_id:
            raise ValueError("parent_id: a dv record must name its orig record in parent_id")
        if self.view in ("orig", "dv") and is_blank(self.instruction):
            raise ValueError(
                f"instruction: a {self.view} record needs a non-empty instruction "
                "(not only whitespace or invisible characters)"
            )
        seen: dict[str, str] = {}
        for list_name in DOC_LISTS:
            for doc in getattr(self, list_name):
                if doc.id in seen:
                    raise ValueError(
                        f"{list_name}: document id {doc.id!r} appears twice in the record "
                        f"(also in {seen[doc.id]})"
                    )
                seen[doc.id] = list_name
        return self

    def documents(self) -> list[Document]:
        """All documents of the record: positives, instruction negatives, hard negatives."""
        return [*self.positives, *self.instruction_negatives, *self.hard_negatives]

    def negatives(self) -> list[Document]:
        """Labelled negatives: instruction negatives first, then hard negatives."""
        return [*self.instruction_negatives, *self.hard_negatives]

    def to_json_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict; ``meta`` is left out when empty."""
        data = self.model_dump(mode="json")
        if not data["meta"]:
            del data["meta"]
        return data
