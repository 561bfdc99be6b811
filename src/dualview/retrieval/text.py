"""The text a model reads for a document, shared by training, mining and evaluation."""

from __future__ import annotations

from dualview.data.schema import Document


def doc_text(doc: Document) -> str:
    """Text a model reads for a document: ``title text`` (mteb/BEIR convention)."""
    return f"{doc.title} {doc.text}".strip() if doc.title else doc.text
