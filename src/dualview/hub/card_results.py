"""What a model card reads of ``dualview eval`` results: whose they are, and on which data.

- `eval_results`: the result JSONs under the paths given (folders are searched), each with
  the file it came from.
- `identity_of` (`ModelIdentity`, `RerankerIdentity`) and `check_results`: a result is this
  model's only when the fingerprint it records is the model folder's, computed as
  ``dualview eval`` computes it: a bi-encoder's ``model.fingerprint``
  (`dualview.retrieval.encode.Encoder.fingerprint`, in the precision the result ran in), a
  reranker's ``rerank.reranker.fingerprint`` (`Reranker.fingerprint`). Another model's
  result is a located error, or, when the user allows it, kept and marked
  (`CardResult.other_model`) so the card can say so.
- `index_entries`: the Hub ``model-index`` entries of one result: one per Hub dataset its
  files were read from (`hub_dataset`: the Hub cache's ``datasets--ORG--NAME/snapshots/REV``
  folders), with mteb's metric keys (`metric_type`) and the card's values (x100). A result on
  local data has none (the Hub needs a real dataset id, and a local set has none); the card's
  table still shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dualview.errors import DataError
from dualview.eval.layout import display_value
from dualview.io.files import read_json_file
from dualview.models.kinds import SavedKind
from dualview.retrieval.encode import Encoder

#: The Hub's ``task.type`` of every entry (instruction-following retrieval is retrieval).
TASK = {"type": "text-retrieval", "name": "Instruction-following retrieval"}
#: Precisions a bi-encoder result may record (`dualview.retrieval.inference.PRECISIONS`).
_PRECISIONS = ("fp32", "fp16", "bf16")
_HUB_CACHE_PREFIX = "datasets--"


@dataclass(frozen=True)
class CardResult:
    """One ``dualview eval`` result JSON as a card uses it."""

    path: Path
    data: dict[str, Any]
    #: why it is not this model's result (kept because the user allowed it), else None
    other_model: str | None = None

    @property
    def label(self) -> str:
        return str(self.data["benchmark"].get("label") or "?")

    @property
    def metrics(self) -> dict[str, float]:
        """The scalar metrics, as computed."""
        items = self.data["metrics"].items()
        return {k: v for k, v in items if isinstance(v, int | float) and not isinstance(v, bool)}


def _is_result(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("metrics"), dict)
        and isinstance(data.get("benchmark"), dict)
    )


def eval_results(paths: list[Path]) -> list[CardResult]:
    """The ``dualview eval`` result JSONs under ``paths``, by label.

    A folder is searched for result JSONs (other JSON files in it are skipped); a file named
    on its own must be one, and a missing path is an error, never an empty table.
    """
    results = []
    for path in paths:
        if path.is_dir():
            found = [(f, read_json_file(f)) for f in sorted(path.rglob("*.json"))]
            if not any(_is_result(data) for _, data in found):
                raise DataError(path, None, "folder", "no dualview eval result JSON in it")
            results += [CardResult(f, data) for f, data in found if _is_result(data)]
            continue
        data = read_json_file(path)
        if not _is_result(data):
            raise DataError(path, None, "json", "not a dualview eval result (no metrics)")
        results.append(CardResult(path, data))
    return sorted(results, key=lambda r: r.label)


class ModelIdentity:
    """The fingerprint ``dualview eval`` records for the first-stage model (a bi-encoder)
    saved in ``model_dir``, and where a result records it; `RerankerIdentity` for a kind
    that scores pairs (`identity_of` picks by the folder's kind).

    The model is loaded (on the CPU) only when a result is checked, once per precision.
    """

    #: Where a result records this model's fingerprint.
    field = "model.fingerprint"

    def __init__(self, model_dir: Path, kind: SavedKind) -> None:
        self.model_dir = model_dir
        self.kind = kind
        self._known: dict[str, str] = {}

    def fingerprint(self, precision: str = "fp32") -> str:
        if precision not in self._known:
            self._known[precision] = self._compute(precision)
        return self._known[precision]

    def _compute(self, precision: str) -> str:
        encoder = Encoder(
            str(self.model_dir), device="cpu", cache=False, precision=precision, show_progress=False
        )
        try:
            return encoder.fingerprint
        finally:
            encoder.close()

    def recorded(self, data: dict[str, Any]) -> tuple[str | None, str]:
        """``(fingerprint the result records for a model of this kind, precision)``; None
        when the result is not of this kind (a reranker's result for a bi-encoder...)."""
        model = data.get("model") if isinstance(data.get("model"), dict) else {}
        if isinstance(data.get("rerank"), dict):  # a reranker's ranking, or BM25's
            return None, "fp32"
        return model.get("fingerprint"), str(model.get("precision") or "fp32")

    def unrecorded(self, name: str) -> str:
        """Why a result that records no fingerprint of this kind is not this model's."""
        return f"model {name!r} is a two-stage column (a reranker, or BM25), no bi-encoder alone"

    def mismatch(self, data: dict[str, Any]) -> str | None:
        """Why the result ``data`` is not this model's, or None when it is."""
        model = data.get("model") if isinstance(data.get("model"), dict) else {}
        name = model.get("name", "?")
        recorded, precision = self.recorded(data)
        if recorded is None:
            return self.unrecorded(name)
        if precision not in _PRECISIONS:
            return f"model {name!r}: unknown precision {precision!r}"
        own = self.fingerprint(precision)
        if recorded != own:
            return f"model {name!r} has fingerprint {recorded!s:.24}, this model {own:.24}"
        return None


class RerankerIdentity(ModelIdentity):
    """`ModelIdentity` of a reranker: its fingerprint (which holds its own dtype) is the
    result's ``rerank.reranker.fingerprint``."""

    field = "rerank.reranker.fingerprint"

    def _compute(self, precision: str) -> str:
        return self.kind.load_reranker(self.model_dir, "cpu").fingerprint

    def recorded(self, data: dict[str, Any]) -> tuple[str | None, str]:
        rerank = data.get("rerank") if isinstance(data.get("rerank"), dict) else {}
        reranker = rerank.get("reranker")
        return (reranker.get("fingerprint") if isinstance(reranker, dict) else None), "fp32"

    def unrecorded(self, name: str) -> str:
        return f"model {name!r} ranked without a reranker (no {self.field})"


def identity_of(model_dir: Path, kind: SavedKind) -> ModelIdentity:
    """The identity of the model of ``kind`` saved in ``model_dir``: a reranker's when the
    kind scores pairs (it is evaluated over a first stage), else a first stage's."""
    return (RerankerIdentity if kind.scores_pairs else ModelIdentity)(model_dir, kind)


def check_results(
    results: list[CardResult], identity: ModelIdentity, allow_other: bool = False
) -> list[CardResult]:
    """``results`` whose recorded fingerprint is ``identity``'s; another model's result is a
    `DataError` naming its file, or with ``allow_other`` kept with `CardResult.other_model`."""
    checked = []
    for result in results:
        why = identity.mismatch(result.data)
        if why is not None and not allow_other:
            raise DataError(
                result.path,
                None,
                identity.field,
                f"{why}: not the results of {identity.model_dir} (give this model's result "
                "folder, or --allow-other-model-results to show them marked as another model's)",
            )
        checked.append(replace(result, other_model=why))
    return checked


def hub_dataset(path: str | Path) -> tuple[str, str] | None:
    """``(repository id, revision)`` of a file in the Hub cache's layout
    (``.../datasets--ORG--NAME/snapshots/REV/FILE``), else None (a local file)."""
    parts = Path(path).parts
    for i in range(len(parts) - 3):
        if parts[i].startswith(_HUB_CACHE_PREFIX) and parts[i + 1] == "snapshots":
            return parts[i][len(_HUB_CACHE_PREFIX) :].replace("--", "/"), parts[i + 2]
    return None


def metric_type(name: str) -> str:
    """mteb's key of a dualview metric: ``nDCG@10`` -> ``ndcg_at_10``, ``MAP@1000`` ->
    ``map_at_1000``; ``p-MRR`` is mteb's own key; other names in the same style."""
    if name == "p-MRR":
        return name
    return re.sub(r"[^a-z0-9]+", "_", name.lower().replace("@", "_at_")).strip("_")


def _entry(
    result: CardResult, repo: str, revision: str, name: str, metrics: dict[str, float]
) -> dict[str, Any]:
    shown = [
        {"type": metric_type(m), "value": round(display_value(m, v), 4), "name": m}
        for m, v in metrics.items()
    ]
    main = result.data["benchmark"].get("main_score")
    if main in metrics:  # as mteb's cards carry it
        value = round(display_value(main, metrics[main]), 4)
        shown.append({"type": "main_score", "value": value, "name": f"main score ({main})"})
    dataset = {"type": repo, "name": name, "split": "test", "revision": revision}
    return {"task": dict(TASK), "dataset": dataset, "metrics": shown}


def index_entries(result: CardResult) -> list[dict[str, Any]]:
    """The ``model-index`` entries of ``result`` (see module docstring): per Hub dataset, the
    metrics of the set it holds (``Set/metric``, a set named in the repository's name), or,
    from a single repository, every metric; none for another model's result or local data."""
    files = result.data["benchmark"].get("files")
    sources = [hub_dataset(str(f)) for f in files] if isinstance(files, list) else []
    if result.other_model is not None or not sources or None in sources:
        return []
    repos = list(dict.fromkeys(s for s in sources if s is not None))
    metrics = result.metrics
    prefixes = sorted({m.split("/", 1)[0] for m in metrics if "/" in m})
    entries = []
    for repo, revision in repos:
        named = [p for p in prefixes if p.lower() in repo.rsplit("/", 1)[-1].lower()]
        if len(named) == 1:
            own = {
                m.split("/", 1)[1]: v for m, v in metrics.items() if m.startswith(f"{named[0]}/")
            }
            name = f"{result.data['benchmark'].get('name') or result.label} {named[0]}"
            entries.append(_entry(result, repo, revision, name, own))
        elif len(repos) == 1:
            entries.append(_entry(result, repo, revision, result.label, metrics))
    return entries
