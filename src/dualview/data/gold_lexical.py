"""A lexical baseline on the gold set: how far word matching alone gets on its pairs.

For every instance, BM25 (scored over all gold passages) ranks two pairs:

- orig: query + instruction must score P+ above N*;
- dv: query + reversed instruction must score N* above P+.

A tie counts as a miss. ``both`` is the share of instances where both pairs are right; a
model that ignores the instruction gets at most one of the two, so chance for ``both`` is
about 0.25. Far above that outside ``keyword_inclusion`` (where the keyword is the point)
would mean the instructions give the answer away by their words.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dualview.data.bm25 import BM25
from dualview.data.gold import GoldInstance


@dataclass
class PairAccuracy:
    """Counts of correct orig pairs, dv pairs and both, over ``n`` instances."""

    n: int = 0
    orig: int = 0
    dv: int = 0
    both: int = 0

    def add(self, orig_ok: bool, dv_ok: bool) -> None:
        self.n += 1
        self.orig += orig_ok
        self.dv += dv_ok
        self.both += orig_ok and dv_ok

    def rates(self) -> dict[str, float]:
        """Shares of ``n`` (0 when empty)."""
        n = max(1, self.n)
        return {"orig": self.orig / n, "dv": self.dv / n, "both": self.both / n}


def lexical_pairwise(instances: list[GoldInstance]) -> dict[str, PairAccuracy]:
    """BM25 pair accuracy overall (``"all"``), per constraint type and per domain."""
    bm25 = BM25([p for inst in instances for p in inst.passages()])
    results: dict[str, PairAccuracy] = defaultdict(PairAccuracy)
    for inst in instances:
        orig_query = f"{inst.query} {inst.instruction}"
        dv_query = f"{inst.query} {inst.reversed_instruction}"
        orig_ok = bm25.score(orig_query, inst.positive) > bm25.score(orig_query, inst.n_star)
        dv_ok = bm25.score(dv_query, inst.n_star) > bm25.score(dv_query, inst.positive)
        for key in ("all", f"type:{inst.constraint_type}", f"domain:{inst.domain}"):
            results[key].add(orig_ok, dv_ok)
    return dict(sorted(results.items()))
