"""Possible false negatives among the builder's extra hard negatives, found with an encoder.

The builder adds hard negatives drawn from *other* instances of the same domain. Such a
passage answers a different query, but within one domain it might still answer this one,
which would make it a false negative. This check encodes every query and passage with a
sentence-transformers model and flags an extra hard negative whose similarity to the query
is at least ``min(sim(query, P+), sim(query, N*)) - margin``: it looks as relevant to the
bare query as the passages that do answer it. A flagged passage needs a human look; the
fix is to rewrite a hard negative or positive so that it no longer answers the other query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from dualview.data.gold import LocatedInstance, hard_negatives_for, pool_of_extras
from dualview.data.gold_check import Finding
from dualview.data.schema import Document


class TextEncoder(Protocol):
    """Anything with ``encode(texts) -> (n, dim) array`` (e.g. ``retrieval.encode.Encoder``)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _doc_text(doc: Document) -> str:
    return f"{doc.title} {doc.text}".strip()


def suspect_extras(
    located: list[LocatedInstance],
    encoder: TextEncoder,
    n_hard: int,
    margin: float = 0.02,
) -> list[Finding]:
    """Findings of kind ``possible_false_negative`` for extras as close to the query as P+/N*."""
    instances = [li.instance for li in located]
    pool = pool_of_extras(instances)
    extras = {i.instance: hard_negatives_for(i, pool, n_hard)[2:] for i in instances}
    docs: dict[str, Document] = {}
    for inst in instances:
        for doc in (inst.positive.document(), inst.n_star.document(), *extras[inst.instance]):
            docs.setdefault(doc.id, doc)
    doc_ids = list(docs)
    doc_vecs = _unit(np.asarray(encoder.encode([_doc_text(docs[d]) for d in doc_ids])))
    query_vecs = _unit(np.asarray(encoder.encode([i.query for i in instances])))
    row = {doc_id: k for k, doc_id in enumerate(doc_ids)}
    findings = []
    for li, query_vec in zip(located, query_vecs, strict=True):
        inst = li.instance
        sim = {d: float(doc_vecs[row[d]] @ query_vec) for d in doc_ids}
        floor = min(sim[inst.positive.document().id], sim[inst.n_star.document().id]) - margin
        for doc in extras[inst.instance]:
            if sim[doc.id] >= floor:
                detail = (
                    f"extra hard negative {doc.title!r} ({doc.id}) is as close to the query "
                    f"as P+/N* (cosine {sim[doc.id]:.2f} >= {floor:.2f})"
                )
                findings.append(
                    Finding(inst.instance, li.path, li.line, "possible_false_negative", detail)
                )
    return findings
