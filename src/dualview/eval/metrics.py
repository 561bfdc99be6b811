"""Retrieval metrics: p-MRR (FollowIR), IR measures through pytrec_eval, pairwise accuracy.

A *run* is ``{query_id: {doc_id: score}}``; *qrels* are ``{query_id: {doc_id: relevance}}``.
Every function returns the mean **and** the per-query values, so reports can show spreads,
significance tests can pair queries, and a number can be traced to the queries behind it.

**Ranks** everywhere in this module follow trec_eval and mteb: documents sorted by score,
ties broken by document id, both descending (so among equal scores ``"d9"`` ranks above
``"d1"``). A document absent from a run ranks ``len(run) + 1``.

**p-MRR** (FollowIR; the same numbers as mteb's ``calculate_pmrr``): for a query run once
with the original instruction and once with the changed one, each document that was relevant
under the original and is not under the changed instruction has ranks ``R_og`` and ``R_new``
and contributes

- ``R_new / R_og - 1`` when ``R_og >= R_new`` (it moved up or stayed: ``4 -> 1`` gives -0.75),
- ``1 - R_og / R_new`` otherwise (it moved down, as it should: ``1 -> 4`` gives +0.75).

The contributions are averaged per query, then over queries. Values lie in [-1, 1]; this
module reports them ×100 (the papers' scale), per query as well.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dualview.errors import DualviewError

logger = logging.getLogger(__name__)

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]


@dataclass
class MetricResult:
    """One metric: its mean over queries and the value of every query."""

    mean: float
    per_query: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"mean": self.mean, "per_query": self.per_query}


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def ranking(scores: Mapping[str, float]) -> list[str]:
    """Document ids best first: score, then document id, both descending."""
    return [d for d, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def rank_of(scores: Mapping[str, float], doc_id: str) -> int:
    """1-based rank of ``doc_id`` in ``scores`` (see `ranking`); absent: ``len + 1``."""
    order = ranking(scores)
    try:
        return order.index(doc_id) + 1
    except ValueError:
        return len(order) + 1


def rank_change_score(og_rank: int, new_rank: int) -> float:
    """p-MRR contribution of one document in [-1, 1] (module docstring); positive is good."""
    if og_rank >= new_rank:
        return new_rank / og_rank - 1.0
    return 1.0 - og_rank / new_rank


def p_mrr(og_run: Run, new_run: Run, changed: Mapping[str, Sequence[str]]) -> MetricResult:
    """p-MRR ×100 over the queries of ``changed`` (query id -> documents whose relevance the
    changed instruction removed), from the two runs keyed by the same query ids.

    Queries missing from either run, or without changed documents, are skipped with a
    warning, as mteb does.
    """
    per_query: dict[str, float] = {}
    for qid, docs in changed.items():
        if qid not in og_run or qid not in new_run:
            logger.warning("p-MRR: query %s is missing from a run; skipped", qid)
            continue
        if not docs:
            continue
        og_order = {d: i + 1 for i, d in enumerate(ranking(og_run[qid]))}
        new_order = {d: i + 1 for i, d in enumerate(ranking(new_run[qid]))}
        og_missing, new_missing = len(og_order) + 1, len(new_order) + 1
        contributions = [
            rank_change_score(og_order.get(d, og_missing), new_order.get(d, new_missing))
            for d in docs
        ]
        per_query[qid] = 100.0 * _mean(contributions)
    return MetricResult(mean=_mean(per_query.values()), per_query=per_query)


def pairwise_accuracy(
    run: Run, satisfying: Mapping[str, Sequence[str]], violating: Mapping[str, Sequence[str]]
) -> MetricResult:
    """Share (×100) of (satisfying, violating) document pairs ranked in the right order.

    For each query, every document that satisfies its constraint is compared with every one
    that violates it, by rank (ties by document id, see `ranking`); the per-query value
    is the share of pairs where the satisfying one ranks higher. Queries without both kinds
    are skipped.
    """
    per_query: dict[str, float] = {}
    for qid, good in satisfying.items():
        bad = violating.get(qid, ())
        if not good or not bad or qid not in run:
            continue
        order = {d: i for i, d in enumerate(ranking(run[qid]))}
        missing = len(order)
        wins = [order.get(g, missing) < order.get(b, missing) for g in good for b in bad]
        per_query[qid] = 100.0 * _mean(1.0 if w else 0.0 for w in wins)
    return MetricResult(mean=_mean(per_query.values()), per_query=per_query)


# pytrec_eval measure for each of our names; "@k" is appended as the cutoff.
_TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "p": "P"}
_METRIC_RE = re.compile(r"^(ndcg|map|recall|p|mrr)(?:@(\d+))?$")


def parse_metric(name: str) -> tuple[str, int | None]:
    """``"nDCG@10"`` -> ``("ndcg", 10)``; ``"MRR"`` -> ``("mrr", None)``."""
    match = _METRIC_RE.match(name.lower())
    if not match or (match.group(1) != "mrr" and match.group(2) is None):
        raise DualviewError(
            f"unknown metric {name!r}: use nDCG@k, MAP@k, Recall@k, P@k, MRR or MRR@k"
        )
    return match.group(1), int(match.group(2)) if match.group(2) else None


def _truncate(run: Run, k: int) -> dict[str, dict[str, float]]:
    return {q: {d: float(docs[d]) for d in ranking(docs)[:k]} for q, docs in run.items()}


def ir_metrics(qrels: Qrels, run: Run, metrics: Sequence[str]) -> dict[str, MetricResult]:
    """IR measures through pytrec_eval, named ``nDCG@10``, ``MAP@1000``, ``Recall@100``,
    ``P@5``, ``MRR`` (reciprocal rank of the first relevant document) or ``MRR@10``.

    Means are taken over all queries in ``qrels``; a query the run does not contain scores 0.
    Relevance > 0 counts as relevant (graded relevance is used by nDCG).
    """
    import pytrec_eval

    qrels_clean = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    run_clean = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items()}
    results: dict[str, MetricResult] = {}
    for name in metrics:
        kind, k = parse_metric(name)
        if kind == "mrr":
            measure, scored_run = "recip_rank", _truncate(run_clean, k) if k else run_clean
        else:
            measure, scored_run = f"{_TREC_NAMES[kind]}.{k}", run_clean
        evaluator = pytrec_eval.RelevanceEvaluator(qrels_clean, {measure})
        raw = evaluator.evaluate(scored_run)
        key = measure.replace(".", "_")
        per_query = {q: float(raw.get(q, {}).get(key, 0.0)) for q in qrels_clean}
        results[name] = MetricResult(mean=_mean(per_query.values()), per_query=per_query)
    return results
