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

from dualview.errors import DataError, DualviewError
from dualview.io.atomic import AtomicJsonlWriter
from dualview.io.files import count_lines, iter_json_lines
from dualview.synth.job_stats import JobStats, Outcomes, read_job_stats
from dualview.synth.runner import side_path, write_json

# What a shard's stats must hold to be merged (merged stats lack ``shard``: no re-merge).
SHARD_KEYS = ("job_fingerprint", "input_digest", "shard", "complete", "records_out", "outcomes")


def _load_stats(path: Path) -> JobStats:
    stats_path = side_path(path, "stats.json")
    if not stats_path.is_file():
        raise DualviewError(f"{path}: no {stats_path.name}: this shard has not finished a run")
    stats = read_job_stats(stats_path)
    missing = stats.missing(SHARD_KEYS)
    if missing:
        raise DataError(stats_path, None, missing[0], "missing: not the stats of a synth run")
    return stats


def _shard(stats: JobStats) -> tuple[int, int]:
    assert stats.shard is not None  # checked by `_load_stats`
    return stats.shard


def check_shards(outputs: list[Path]) -> list[tuple[Path, JobStats]]:
    """The shards sorted by index, or a `DualviewError` saying what is wrong."""
    if not outputs:
        raise DualviewError("no shard outputs given")
    loaded = [(path, _load_stats(path)) for path in outputs]
    first = loaded[0][1]
    count = _shard(first)[1]
    for path, stats in loaded:
        if stats.job_fingerprint != first.job_fingerprint:
            raise DualviewError(f"{path}: job_fingerprint differs from {outputs[0]} (another job?)")
        if stats.input_digest != first.input_digest:
            raise DualviewError(f"{path}: input_digest differs from {outputs[0]} (another job?)")
        index, of = _shard(stats)
        if of != count:
            raise DualviewError(f"{path}: shard of {of}, others of {count}")
        if not stats.complete:
            raise DualviewError(
                f"{path}: shard {index} is incomplete "
                f"({stats.outcomes.error} unit(s) in error): rerun it first"
            )
        lines = count_lines(path) if path.exists() else -1
        if lines != stats.records_out:
            raise DualviewError(f"{path}: {lines} record(s), its stats say {stats.records_out}")
    indices = Counter(_shard(stats)[0] for _, stats in loaded)
    missing = sorted(set(range(count)) - set(indices))
    repeated = sorted(i for i, n in indices.items() if n > 1)
    if missing or repeated:
        raise DualviewError(f"shards of {count}: missing {missing}, given twice {repeated}")
    return sorted(loaded, key=lambda item: _shard(item[1])[0])


def merge_shards(out: str | Path, outputs: list[str | Path]) -> JobStats:
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
    write_json(side_path(out, "stats.json"), stats.to_json())
    return stats


def _combine(all_stats: list[JobStats]) -> JobStats:
    first = all_stats[0]
    outcomes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    rejections: Counter[str] = Counter()
    for stats in all_stats:
        outcomes.update(dict(stats.outcomes.items()))
        counts.update(stats.counts)
        rejections.update(stats.rejections or {})  # None in stats before the field
    costs = [s.cost_usd for s in all_stats if s.cost_usd is not None]
    return JobStats(
        task=first.task,
        model=first.model,
        input_units=first.input_units,
        input_digest=first.input_digest,
        job_fingerprint=first.job_fingerprint,
        shards=len(all_stats),
        units=sum(s.units for s in all_stats),
        complete=True,
        outcomes=Outcomes.model_validate(dict(outcomes)),
        records_out=sum(s.records_out for s in all_stats),
        rejections=dict(rejections.most_common()),
        llm_calls=sum(s.llm_calls for s in all_stats),
        tokens_in=sum(s.tokens_in for s in all_stats),
        tokens_out=sum(s.tokens_out for s in all_stats),
        latency_s_by_shard=[s.latency_s for s in all_stats],
        cost_usd=sum(costs) if costs else None,
        counts=dict(counts),
    )
