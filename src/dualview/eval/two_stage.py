"""Two-stage evaluation: a reranker over a first stage, as one column of ``dualview eval``.

A `Ranker` is what produces one model's results: a first stage (``model``: a bi-encoder,
``bm25`` or ``bm25-builtin`` (`dualview.data.bm25`), or ``candidates``: the benchmark's own
candidate lists) and, optionally, a
reranker that rescores the first stage's top ``k`` (`dualview.eval.benchmarks.base` runs
both; `dualview.retrieval.rerank` caches the scores).

- **Names**: a reranked column is called ``<reranker>@<first stage>``, e.g.
  ``out/ce@embedded:minilm`` or ``out/ce@bm25`` (its result folder is the slug of that name,
  ``out_ce@embedded_minilm``), so reranked results never share a folder with first-stage
  ones; BM25 alone is the column ``bm25`` (or ``bm25-builtin``). A reranker whose scores are
  interpolated with the first stage's at weight ``w`` below 1 (`dualview.retrieval.fusion`)
  is the column ``<reranker>~<w>@<first stage>``, e.g. ``out/ce~0.3@embedded:minilm``.
  Two columns whose names give one folder (``a/ce`` and ``a_ce``) are an error before
  anything runs (`dualview.eval.layout.check_result_folders`).
- **Record**: `Ranker.record` (the result JSON's ``rerank`` object) holds the reranker's
  name and fingerprint, the first stage actually used (kind, name, fingerprint), ``k`` and,
  below 1, the interpolation ``weight``;
  a benchmark that reranks its own candidate lists whole (FollowIR) records the first stage
  ``candidates`` and ``top_k: null``. The result's model fingerprint hashes the record, so
  another reranker, first stage or ``k`` is another result.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from dualview.data.bm25 import BM25_KINDS, bm25_fingerprint
from dualview.errors import DualviewError
from dualview.eval.benchmarks.base import FIRST_STAGES, Benchmark, EvalContext
from dualview.models.reranker import RERANKER_FILE, Reranker, load_reranker
from dualview.models.saved import saved_kind
from dualview.retrieval.encode import Encoder
from dualview.retrieval.fusion import check_weight
from dualview.retrieval.inference import PRECISIONS, cast_model, resolve_precision
from dualview.retrieval.rerank import CachedReranker

#: What identifies the hand-written BM25 first stage (its parameters; the code is versioned
#: with dualview); the ``bm25`` first stage's names the `bm25s` version and recipe.
BM25_FINGERPRINT = bm25_fingerprint("bm25-builtin")


@dataclass
class RerankSettings:
    """Rerankers over a first stage (`evaluate`'s ``rerank`` argument).

    Args:
        rerankers: saved reranker folders (`dualview.models.reranker.load_reranker`) or
            loaded `Reranker` objects (named by their ``name`` attribute, else their class);
            each gives one column per first stage. Empty: the first stage alone.
        first_stage: ``model`` (each of `evaluate`'s models), ``bm25`` (`bm25s`, stemmed),
            ``bm25-builtin`` (hand-written, no stemming) or ``candidates``.
        top_k: documents per query the reranker rescores; those beyond ``k`` keep their
            first-stage order below the reranked ones.
        weights: the reranker's share when its scores are interpolated with the first
            stage's (`dualview.retrieval.fusion`), one column per weight and reranker; 1:
            the reranker's order alone (the default).
        precision: the weights of the rerankers loaded from folders (`PRECISIONS`):
            ``auto`` is bf16 on CUDA (fp16 without bf16) and fp32 elsewhere; bf16 on a CPU
            with bf16 instructions scores an LLM reranker several times faster than fp32. The
            dtype is part of a reranker's fingerprint, so scores of two precisions never
            share a cache entry. Loaded `Reranker` objects run as they are.
    """

    rerankers: list[str | Reranker] = field(default_factory=list)
    first_stage: str = "model"
    top_k: int = 20
    weights: list[float] = field(default_factory=lambda: [1.0])
    precision: str = "auto"

    def check(self, models: list[str]) -> None:
        """Raise a clear `DualviewError` for a combination that cannot run (before any work)."""
        if self.first_stage not in FIRST_STAGES:
            raise DualviewError(
                f"first stage {self.first_stage!r}: use one of {', '.join(FIRST_STAGES)}"
            )
        if self.top_k < 1:
            raise DualviewError(f"--top-k must be at least 1, not {self.top_k}")
        if self.first_stage == "model" and not models:
            raise DualviewError("first stage 'model': name at least one MODEL")
        if self.first_stage != "model" and models:
            raise DualviewError(
                f"first stage {self.first_stage!r} uses no model: drop {models[0]!r} "
                "(or use --first-stage model)"
            )
        if self.first_stage == "candidates" and not self.rerankers:
            raise DualviewError("first stage 'candidates' needs a --reranker")
        self._check_weights()
        if self.precision not in PRECISIONS:
            raise DualviewError(
                f"--reranker-precision: one of {', '.join(PRECISIONS)}, not {self.precision!r}"
            )
        names = [reranker_name(item) for item in self.rerankers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise DualviewError(f"two rerankers named {twice[0]!r}: their results would collide")
        for item in self.rerankers:
            if isinstance(item, str):
                check_reranker_folder(item)

    def _check_weights(self) -> None:
        if not self.weights:
            raise DualviewError("--interpolate: give at least one weight (1: the reranker alone)")
        for weight in self.weights:
            check_weight(weight)
        if len(set(self.weights)) < len(self.weights):
            raise DualviewError(f"--interpolate: a weight is given twice ({self.weights})")
        blended = min(self.weights) < 1.0
        if blended and not self.rerankers:
            raise DualviewError(
                "--interpolate blends a reranker with its first stage: give a --reranker"
            )
        if blended and self.first_stage == "candidates":
            raise DualviewError(
                "--interpolate needs first-stage scores: the 'candidates' first stage has none"
            )

    def first_stages(self, models: list[str]) -> list[str]:
        """The first stage of each column group: the models, or the BM25 / ``candidates``."""
        return list(models) if self.first_stage == "model" else [self.first_stage]

    def columns(self, models: list[str]) -> list[str]:
        """The name of every column (`Ranker.name`), in evaluation order."""
        if not self.rerankers:
            return self.first_stages(models)
        return [
            reranked_name(reranker_name(item), first, weight)
            for first in self.first_stages(models)
            for item in self.rerankers
            for weight in self.weights
        ]


def check_reranker_folder(folder: str) -> None:
    """A clear error for a reranker path that does not exist or holds no reranker."""
    path = Path(folder)
    if not path.exists():
        raise DualviewError(f"{path}: reranker folder does not exist")
    if not path.is_dir() or not saved_kind(path).scores_pairs:
        raise DualviewError(
            f"{path}: not a reranker folder (no {RERANKER_FILE} naming a reranker kind; "
            "a bi-encoder is evaluated as MODEL, not --reranker)"
        )


def reranker_name(item: str | Reranker) -> str:
    """The name a reranker's columns carry: its path, or a loaded one's ``name`` / class."""
    if isinstance(item, str):
        return item
    return str(getattr(item, "name", None) or type(item).__name__)


def reranked_name(reranker: str, first_stage: str, weight: float = 1.0) -> str:
    """``<reranker>@<first stage>``, the model name of a reranked column; interpolated at a
    ``weight`` below 1, ``<reranker>~<weight>@<first stage>``."""
    if weight == 1.0:
        return f"{reranker}@{first_stage}"
    return f"{reranker}~{weight:g}@{first_stage}"


def open_reranker(
    item: str | Reranker, device: str | None, batch_size: int, cache: bool, precision: str = "auto"
) -> CachedReranker:
    """A loaded (or given) reranker with its score cache; one loaded from a folder runs in
    ``precision`` (`RerankSettings.precision`)."""
    if isinstance(item, str):
        model = load_reranker(item, device)
        if isinstance(model, nn.Module):
            on = next(model.parameters()).device.type
            cast_model(model, resolve_precision(precision, on), in_place=True)
    else:
        model = item
    return CachedReranker(model, batch_size=batch_size, cache=cache)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:24]


@dataclass
class Ranker:
    """One column of the summary: a first stage, reranked or not (module docstring)."""

    first_stage: str
    first_name: str
    encoder: Encoder | None = None
    reranker: CachedReranker | None = None
    reranker_name: str | None = None
    top_k: int = 20
    weight: float = 1.0

    @property
    def name(self) -> str:
        if self.reranker_name is None:
            return self.first_name
        return reranked_name(self.reranker_name, self.first_name, self.weight)

    @property
    def two_stage(self) -> bool:
        """Whether this column is more than a bi-encoder on its own (results carry a record)."""
        return self.reranker is not None or self.first_stage != "model"

    def context(self, **settings: Any) -> EvalContext:
        return EvalContext(
            encoder=self.encoder,
            first_stage=self.first_stage,
            reranker=self.reranker,
            top_k=self.top_k,
            weight=self.weight,
            **settings,
        )

    def _first_fingerprint(self) -> str | None:
        if self.first_stage in BM25_KINDS:
            return bm25_fingerprint(self.first_stage)
        return self.encoder.fingerprint if self.encoder is not None else None

    def record(self, bench: Benchmark) -> dict[str, Any] | None:
        """The result's ``rerank`` object for ``bench`` (None for a bi-encoder alone)."""
        if not self.two_stage:
            return None
        reranker = None
        if self.reranker is not None:
            reranker = {"name": self.reranker_name, "fingerprint": self.reranker.fingerprint}
        whole = self.reranker is not None and (
            bench.reranks_own_candidates or self.first_stage == "candidates"
        )
        first: dict[str, Any] = {
            "kind": self.first_stage,
            "name": self.first_name,
            "fingerprint": self._first_fingerprint(),
        }
        if whole and self.weight == 1.0:  # interpolated, the first stage scores them all
            first = {"kind": "candidates", "name": "benchmark candidates", "fingerprint": None}
        top_k = self.top_k if reranker is not None and not whole else None
        record = {"reranker": reranker, "first_stage": first, "top_k": top_k}
        if self.weight != 1.0:  # absent at 1: the records (and fingerprints) of before
            record["weight"] = self.weight
        return record

    def fingerprint(self, bench: Benchmark) -> str:
        """The result's model fingerprint: the encoder's, or a hash of the record."""
        record = self.record(bench)
        if record is None:
            return self.encoder.fingerprint  # type: ignore[union-attr]
        return _digest(record)

    def model_info(self, bench: Benchmark) -> dict[str, Any]:
        """The result's ``model`` object."""
        info: dict[str, Any] = {"name": self.name, "fingerprint": self.fingerprint(bench)}
        if self.encoder is not None:
            info["dim"] = self.encoder.dim
            info["max_seq_length"] = getattr(self.encoder.model, "max_seq_length", None)
            info["precision"] = self.encoder.precision
        return info

    def close(self) -> None:
        if self.reranker is not None:
            self.reranker.close()


__all__ = [
    "BM25_FINGERPRINT",
    "Ranker",
    "RerankSettings",
    "check_reranker_folder",
    "open_reranker",
    "reranked_name",
    "reranker_name",
]
