"""Okapi BM25 over a fixed collection of passages (anything with a ``title`` and a ``text``).

Two implementations, chosen by name (`BM25_KINDS`, `bm25_index`):

- ``bm25`` (`BM25S`, the default first stage of two-stage evaluation,
  `dualview.eval.benchmarks.base`): the maintained `bm25s` library with its published
  recipe: scikit-learn's word pattern, English stop words, the Snowball English stemmer
  (PyStemmer), Lucene's BM25 with ``k1=1.5``, ``b=0.75``, so numbers are comparable with
  published BM25 baselines.
- ``bm25-builtin`` (`BM25`, hand-written): words are `dualview.data.gold_check.tokens`
  (lower-cased alphabetic words, no stemming, no stop words), ``k1=1.2``, ``b=0.75``. It is
  what word matching means where the question is literal overlap: the gold set's lexical
  check (`dualview.data.gold_lexical`) and the lexical suspects of the flip report, which
  also score single passages (`BM25.score`); and the first stage of results from before
  ``bm25`` meant `BM25S`.

Both index the collection once, so ``scores`` ranks the whole collection for a query in time
proportional to the postings of the query's words; ``top_k`` is shared.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Protocol

import numpy as np

from dualview.data.gold_check import tokens


class Passage(Protocol):
    """What BM25 reads of a passage."""

    title: str
    text: str


def passage_text(passage: Passage) -> str:
    """The text BM25 reads of a passage: its title, then its text."""
    return f"{passage.title or ''} {passage.text}"


def passage_words(passage: Passage) -> list[str]:
    """The words BM25 counts in a passage: its title and its text."""
    return tokens(passage_text(passage))


class RankedIndex:
    """What both implementations share: ``n`` passages, ``scores`` and the ranking."""

    n: int

    def scores(self, query: str) -> np.ndarray:
        raise NotImplementedError

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


class BM25(RankedIndex):
    """Okapi BM25 over ``passages`` (``k1``, ``b`` as usual; idf ``log(1 + (n-df+.5)/(df+.5))``)."""

    kind = "bm25-builtin"

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

    @property
    def fingerprint(self) -> str:
        """What identifies this ranking (the first stage's fingerprint in results)."""
        return f"bm25:k1={self.k1}:b={self.b}"


class BM25S(RankedIndex):
    """BM25 by the `bm25s` library over ``passages``: stemmed, stop words removed (module
    docstring). `bm25s` and PyStemmer are imported on first use (they are core
    dependencies; the import takes a quarter of a second)."""

    kind = "bm25"
    stemmer_language = "english"
    stopwords = "en"

    def __init__(
        self, passages: Sequence[Passage], k1: float = 1.5, b: float = 0.75, method: str = "lucene"
    ) -> None:
        import bm25s

        self.k1, self.b, self.method = k1, b, method
        self.n = len(passages)
        self._index = bm25s.BM25(k1=k1, b=b, method=method)
        if self.n:
            words = self._words([passage_text(p) for p in passages])
            self._index.index(words, show_progress=False)

    def _words(self, texts: list[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(
            texts,
            stopwords=self.stopwords,
            stemmer=_stemmer(self.stemmer_language),
            return_ids=False,
            show_progress=False,
        )

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every indexed passage for ``query``, float32 ``[n]`` in index order."""
        words = self._words([query])[0] if self.n else []
        known = self._index.get_tokens_ids(words) if words else []
        if not known:  # no word of the query in the collection: every passage scores 0
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self._index.get_scores_from_ids(known), dtype=np.float32)

    @property
    def fingerprint(self) -> str:
        """What identifies this ranking: the library's version and the recipe."""
        return (
            f"bm25s-{version('bm25s')}:{self.method}:k1={self.k1}:b={self.b}"
            f":stem={self.stemmer_language}:stop={self.stopwords}"
        )


def _stemmer(language: str) -> Callable[[list[str]], list[str]]:
    import Stemmer

    return Stemmer.Stemmer(language).stemWords


#: The BM25 implementations by the name a first stage uses (``bm25`` is the default).
BM25_KINDS: dict[str, type[BM25] | type[BM25S]] = {BM25S.kind: BM25S, BM25.kind: BM25}


def bm25_index(kind: str, passages: Sequence[Passage]) -> BM25 | BM25S:
    """The ``kind`` BM25 (`BM25_KINDS`) over ``passages``."""
    return BM25_KINDS[kind](passages)


def bm25_fingerprint(kind: str) -> str:
    """The fingerprint of ``kind``'s ranking, without indexing anything."""
    return bm25_index(kind, []).fingerprint


__all__ = [
    "BM25",
    "BM25S",
    "BM25_KINDS",
    "Passage",
    "RankedIndex",
    "bm25_fingerprint",
    "bm25_index",
    "passage_text",
    "passage_words",
]
