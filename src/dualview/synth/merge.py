"""Merge the outputs of ``--shard i/n`` runs into one file, after checking they fit together.

Shards are contiguous blocks of the input, so concatenating their outputs in shard order gives
input order. The merge refuses (with the reason) unless every shard 0..n-1 is present exactly
once, all ran the same job (same job fingerprint) over the same input (same input digest),
every shard is complete (no unit left in ``error``) and every output file still has the number
of records its stats say.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from dualview.errors import DataError, DualviewError
from dualview.io.atomic import AtomicJsonlWriter
from dualview.io.files import count_lines, iter_json_lines, read_json_file
from dualview.synth.runner import side_path, write_json


def _load_stats(path: Path) -> dict[str, Any]:
    stats_path = side_path(path, "stats.json")
    if not stats_path.is_file():
        raise DualviewError(f"{path}: no {stats_path.name}: this shard has not finished a run")
    stats = read_json_file(stats_path)
    missing = [k for k in SHARD_KEYS if not isinstance(stats, dict) or k not in stats]
    if missing:
        raise DataError(stats_path, None, missing[0], "missing: not the stats of a synth run")
    return stats


SHARD_KEYS = ("job_fingerprint", "input_digest", "shard", "complete", "records_out", "outcomes")


def check_shards(outputs: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """The shards sorted by index, or a `DualviewError` saying what is wrong."""
    if not outputs:
        raise DualviewError("no shard outputs given")
    loaded = [(path, _load_stats(path)) for path in outputs]
    first = loaded[0][1]
    count = first["shard"][1]
    for path, stats in loaded:
        for key in ("job_fingerprint", "input_digest"):
            if stats[key] != first[key]:
                raise DualviewError(f"{path}: {key} differs from {outputs[0]} (another job?)")
        if stats["shard"][1] != count:
            raise DualviewError(f"{path}: shard of {stats['shard'][1]}, others of {count}")
        if not stats["complete"]:
            raise DualviewError(
                f"{path}: shard {stats['shard'][0]} is incomplete "
                f"({stats['outcomes']['error']} unit(s) in error): rerun it first"
            )
        lines = count_lines(path) if path.exists() else -1
        if lines != stats["records_out"]:
            raise DualviewError(f"{path}: {lines} record(s), its stats say {stats['records_out']}")
    indices = Counter(stats["shard"][0] for _, stats in loaded)
    missing = sorted(set(range(count)) - set(indices))
    repeated = sorted(i for i, n in indices.items() if n > 1)
    if missing or repeated:
        raise DualviewError(f"shards of {count}: missing {missing}, given twice {repeated}")
    return sorted(loaded, key=lambda item: item[1]["shard"][0])


def merge_shards(out: str | Path, outputs: list[str | Path]) -> dict[str, Any]:
    """Write the merged OUT, ``OUT.dropped.jsonl`` and ``OUT.stats.json``; returns the stats."""
    out = Path(out)
    shards = check_shards([Path(p) for p in outputs])
    for name in ("", "dropped.jsonl"):
        target = side_path(out, name) if name else out
        with AtomicJsonlWriter(target) as writer:
            for path, _ in shards:
                source = side_path(path, name) if name else path
                for _, obj in iter_json_lines(source) if source.exists() else []:
                    writer.write(obj)
    stats = _combine([stats for _, stats in shards])
    write_json(side_path(out, "stats.json"), stats)
    return stats


def _combine(all_stats: list[dict[str, Any]]) -> dict[str, Any]:
    first = all_stats[0]
    outcomes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    rejections: Counter[str] = Counter()
    for stats in all_stats:
        outcomes.update(stats["outcomes"])
        counts.update(stats["counts"])
        rejections.update(stats.get("rejections", {}))  # absent in stats before the field
    costs = [s["cost_usd"] for s in all_stats if s["cost_usd"] is not None]
    return {
        "task": first["task"],
        "model": first["model"],
        "input_units": first["input_units"],
        "input_digest": first["input_digest"],
        "job_fingerprint": first["job_fingerprint"],
        "shards": len(all_stats),
        "units": sum(s["units"] for s in all_stats),
        "complete": True,
        "outcomes": dict(outcomes),
        "records_out": sum(s["records_out"] for s in all_stats),
        "rejections": dict(rejections.most_common()),
        "llm_calls": sum(s["llm_calls"] for s in all_stats),
        "tokens_in": sum(s["tokens_in"] for s in all_stats),
        "tokens_out": sum(s["tokens_out"] for s in all_stats),
        "latency_s_by_shard": [s["latency_s"] for s in all_stats],
        "cost_usd": sum(costs) if costs else None,
        "counts": dict(counts),
    }
