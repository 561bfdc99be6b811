"""The text a model reads for a document, shared by training, mining and evaluation."""

from __future__ import annotations

from dualview.data.schema import Document


def doc_text(doc: Document) -> str:
    """Text a model reads for a document: ``title text`` (mteb/BEIR convention)."""
    return f"{doc.title} {doc.text}".strip() if doc.title else doc.text


class InstructedQuery(str):
    """A query text joined with its instruction (the ``str`` value, what concatenation
    models read) that also keeps the two parts, for models that encode them apart
    (the cross-attention interaction, `dualview.models.interaction`)."""

    query: str
    instruction: str

    def __new__(cls, text: str, query: str, instruction: str) -> InstructedQuery:
        obj = super().__new__(cls, text)
        obj.query = query
        obj.instruction = instruction
        return obj
