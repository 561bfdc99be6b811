"""Okapi BM25 over a fixed collection of passages (anything with a ``title`` and a ``text``).

Used where word matching is the question or the baseline: the gold set's lexical check
(`dualview.data.gold_lexical`), the lexical suspects of the flip report, and the ``bm25``
first stage of two-stage evaluation (`dualview.eval.benchmarks.base`).

Words are `dualview.data.gold_check.tokens` (lower-cased alphabetic words, no stemming).
The collection is indexed once (term frequencies per passage and an inverted index), so
`BM25.scores` ranks the whole collection for a query in time proportional to the postings
of the query's words.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from dualview.data.gold_check import tokens


class Passage(Protocol):
    """What BM25 reads of a passage."""

    title: str
    text: str


def passage_words(passage: Passage) -> list[str]:
    """The words BM25 counts in a passage: its title and its text."""
    return tokens(f"{passage.title or ''} {passage.text}")


class BM25:
    """Okapi BM25 over ``passages`` (``k1``, ``b`` as usual; idf ``log(1 + (n-df+.5)/(df+.5))``)."""

    def __init__(self, passages: Sequence[Passage], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.df: Counter[str] = Counter()
        #: word -> [(row, term frequency)] over the indexed passages
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        lengths = []
        for row, passage in enumerate(passages):
            tf = Counter(passage_words(passage))
            self.df.update(tf.keys())
            for word, count in tf.items():
                self.postings[word].append((row, count))
            lengths.append(sum(tf.values()))
        self.n = len(passages)
        self.lengths = np.asarray(lengths, dtype=np.float64)
        self.avg_len = float(self.lengths.sum()) / max(1, self.n)

    def idf(self, word: str) -> float:
        df = self.df[word]
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def _norm(self, length: float | np.ndarray) -> float | np.ndarray:
        return self.k1 * (1 - self.b + self.b * length / max(1e-9, self.avg_len))

    def score(self, query: str, passage: Passage) -> float:
        """BM25 of one ``passage`` (indexed or not) for ``query``."""
        words = passage_words(passage)
        tf = Counter(words)
        norm = self._norm(len(words))
        total = 0.0
        for word in set(tokens(query)):
            if word in tf:
                total += self.idf(word) * tf[word] * (self.k1 + 1) / (tf[word] + norm)
        return total

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every indexed passage for ``query``, float32 ``[n]`` in index order."""
        out = np.zeros(self.n, dtype=np.float64)
        norms = self._norm(self.lengths)
        for word in set(tokens(query)):
            postings = self.postings.get(word)
            if not postings:
                continue
            rows = np.fromiter((r for r, _ in postings), dtype=np.int64, count=len(postings))
            tf = np.fromiter((c for _, c in postings), dtype=np.float64, count=len(postings))
            out[rows] += self.idf(word) * tf * (self.k1 + 1) / (tf + norms[rows])
        return out.astype(np.float32)

    def top_k(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, rows)`` of the ``k`` best passages, best first (ties: lower row first)."""
        scores = self.scores(query)
        k = min(k, self.n)
        if k <= 0:
            return scores[:0], np.zeros(0, dtype=np.int64)
        if k < self.n:  # every passage scoring at least the k-th best, ties at the cut included
            kth = -np.partition(-scores, k - 1)[k - 1]
            rows = np.flatnonzero(scores >= kth)
        else:
            rows = np.arange(self.n)
        order = rows[np.lexsort((rows, -scores[rows]))][:k]
        return scores[order], order


__all__ = ["BM25", "Passage", "passage_words"]
