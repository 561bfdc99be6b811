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

import math
from collections import Counter, defaultdict
from dataclasses import dataclass

from dualview.data.gold import GoldInstance, GoldPassage
from dualview.data.gold_check import tokens


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


class BM25:
    """Okapi BM25 over a fixed passage collection (``k1``, ``b`` as usual)."""

    def __init__(self, passages: list[GoldPassage], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.df: Counter[str] = Counter()
        lengths = []
        for passage in passages:
            words = tokens(f"{passage.title} {passage.text}")
            self.df.update(set(words))
            lengths.append(len(words))
        self.n = len(passages)
        self.avg_len = sum(lengths) / max(1, self.n)

    def score(self, query: str, passage: GoldPassage) -> float:
        """BM25 of ``passage`` for ``query``."""
        words = tokens(f"{passage.title} {passage.text}")
        tf = Counter(words)
        norm = self.k1 * (1 - self.b + self.b * len(words) / max(1e-9, self.avg_len))
        total = 0.0
        for word in set(tokens(query)):
            if word in tf:
                idf = math.log(1 + (self.n - self.df[word] + 0.5) / (self.df[word] + 0.5))
                total += idf * tf[word] * (self.k1 + 1) / (tf[word] + norm)
        return total


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
