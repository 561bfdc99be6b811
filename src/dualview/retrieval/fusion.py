"""Score interpolation: a reranker's scores blended with its first stage's, per query.

A reranker that is worse than its first stage on its own can still carry what the first
stage lacks (here: reading the instruction), and the first stage what the reranker lacks.
The convex combination of the two stages' scores, each min-max normalised over the
documents the reranker saw for that query, keeps both::

    fused(d) = w * mm(reranker)(d) + (1 - w) * mm(first)(d)
    mm(s)(d) = (s(d) - min s) / (max s - min s)        (0 for every d when max s = min s)

with ``w`` in (0, 1]: ``w = 1`` ranks by the reranker alone (the plain second stage),
``w -> 0`` by the first stage. Min-max per query makes the two scales comparable (a
bi-encoder's cosine and a cross-encoder's logit are not) without a parameter besides
``w``; Bruch et al. (2023, "An Analysis of Fusion Functions for Hybrid Retrieval") found
this convex combination robust and better than rank fusion (RRF) once ``w`` is tuned on a
few queries, which is why ``w`` is chosen on a validation split (``-b gold-val``), never on
the set it is reported on.
"""

from __future__ import annotations

from collections.abc import Mapping

from dualview.errors import DualviewError


def check_weight(weight: float) -> float:
    """``weight`` itself, or a `DualviewError` when it is not in (0, 1]."""
    if not 0.0 < weight <= 1.0:
        raise DualviewError(
            f"interpolation weight {weight!r}: give the reranker's share, in (0, 1] "
            "(1: the reranker alone)"
        )
    return weight


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores mapped onto [0, 1] (the lowest to 0, the highest to 1); all 0 when equal."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    return {d: (s - low) / span if span > 0 else 0.0 for d, s in scores.items()}


def interpolate(
    first: Mapping[str, float], second: Mapping[str, float], weight: float
) -> dict[str, float]:
    """The fused score of every document of ``second`` (module docstring).

    Args:
        first: the first stage's scores; must hold every document of ``second``.
        second: the reranker's scores of one query's documents.
        weight: the reranker's share ``w`` in (0, 1].
    """
    check_weight(weight)
    missing = [d for d in second if d not in first]
    if missing:
        raise DualviewError(f"interpolation: document {missing[0]!r} has no first-stage score")
    a = min_max({d: first[d] for d in second})
    b = min_max(second)
    return {d: weight * b[d] + (1.0 - weight) * a[d] for d in second}


__all__ = ["check_weight", "interpolate", "min_max"]
