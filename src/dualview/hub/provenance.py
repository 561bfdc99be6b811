"""What built a training file, gathered from the files dualview writes beside it.

A mix (``dualview mix``) writes ``<file>.manifest.json`` naming its source files with their
sha256; every LLM stage (seed, synth, verify, poison) writes ``<output>.stats.json`` with the
model identity, the sampling, the task fingerprint (prompt template sha256, task settings,
parser version) and the task summary (a verification's swap accuracy). `collect` follows
the manifest to its sources and reads the stats found beside each, so a dataset card can say
how every record was made without the user restating it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dualview.data.manifest import read_manifest
from dualview.errors import DualviewError
from dualview.io.files import read_json_file
from dualview.review.stats import card_review_fields, review_summary
from dualview.synth.job_stats import parse_job_stats

STATS_SUFFIX = ".stats.json"
# Keys of an LLM stage's stats worth carrying into a card (the rest is run bookkeeping).
LLM_KEYS = (
    "task",
    "model",
    "sampling",
    "task_fingerprint",
    "job_fingerprint",
    "units",
    "outcomes",
    "records_out",
    "summary",
    "complete",
)


def llm_stage(output: Path) -> dict[str, Any] | None:
    """The card-relevant part of ``<output>.stats.json``, or ``None`` without one."""
    stats_file = output.with_name(output.name + STATS_SUFFIX)
    if not stats_file.is_file():
        return None
    stats = parse_job_stats(read_json_file(stats_file))
    if stats is None:  # not an LLM job's stats
        return None
    data = stats.to_json()
    return {"file": output.name, **{k: data[k] for k in LLM_KEYS if k in data}}


def review_stats(path: str | Path) -> dict[str, Any]:
    """Human-review accuracy for a card: ``{"accuracy", "ci_low", "ci_high", "n", ...}``.

    ``path`` is one of:

    - a verdict file (``*.jsonl``, what ``dualview review`` appends to): summarised with
      `dualview.review.stats.review_summary` (latest verdict per reviewer and item);
    - the JSON that ``dualview review stats -o`` writes (``accuracy`` is a proportion
      ``{"k", "n", "rate", "ci95"}``);
    - a JSON file already in the card's flat form ``{"accuracy": 0.8, "ci_low": 0.7,
      "ci_high": 0.9, "n": 50}``.
    """
    path = Path(path)
    if path.is_dir():
        raise DualviewError(f"{path}: give a verdict file (JSONL) or a review summary (JSON)")
    data = review_summary(path) if path.suffix == ".jsonl" else read_json_file(path)
    if not isinstance(data, dict) or "accuracy" not in data:
        raise DualviewError(f"{path}: a review summary needs an 'accuracy' field")
    if isinstance(data["accuracy"], dict):
        data = card_review_fields(data)
    if not isinstance(data.get("accuracy"), int | float):
        raise DualviewError(f"{path}: no verdicts to summarise (accuracy is not a number)")
    return json.loads(json.dumps(data, default=str))


def collect(source: str | Path, review: str | Path | None = None) -> dict[str, Any]:
    """Provenance of the training file ``source`` (see module docstring)."""
    source = Path(source)
    manifest = read_manifest(source)
    paths = [source] + [Path(s["path"]) for s in (manifest or {}).get("sources", [])]
    stages = [stage for path in paths if (stage := llm_stage(path)) is not None]
    return {
        "file": source.name,
        "manifest": manifest,
        "llm_stages": stages,
        "review": review_stats(review) if review is not None else None,
    }
