"""Size-matched training mixes: the paper's four configurations and custom ratio mixes.

A mix is a total ``size`` split over views by ``parts`` (shares, rounded by largest remainder).
A part with ``paired: true`` (``dv`` or ``plain``) takes the counterpart records of the chosen
``orig`` instances: their dual-view record (``parent_id``) or their non-instruct counterpart
(``meta.counterpart_id``). The paper's configurations (at any even ``size`` N):

=========  =====================================  =====================
preset     contents                               paper size
=========  =====================================  =====================
ins-orig   N orig                                 480k
ins-dv     N/2 orig + the N/2 dv of those same    240k + 240k
all-orig   N/2 orig + their N/2 plain counterparts 440k + 440k
all-dv     N/2 orig + their N/2 dv                440k + 440k
orig+dv    N/2 orig + their N/2 dv, additive      (not in the paper)
=========  =====================================  =====================

``orig+dv`` is the *additive* arm: the same parts as ``ins-dv``, under its own name because
it is meant at twice the size of an ``ins-orig`` mix: at ``2N`` it takes the same ``N`` orig
instances as ``ins-orig`` at ``N`` (the first ``N`` of the seeded order, when every one has a
dual view) plus their reversals, so the two differ only by the dual views, at the same
``max_steps``. An experiment refuses an ``orig+dv`` mix of any other size (``size: auto``
included) beside an ``ins-orig`` one (`dualview.pipeline.experiment.size_mismatch`).

Selection (deterministic given the inputs and ``seed``): ``orig`` ids are sorted and shuffled
with the seed. For each paired part of count n, the first n shuffled instances that have such
a counterpart are taken; the chosen ``orig`` set is the union of those, filled up to its count
in shuffled order. Not enough eligible instances is an error that says how many are missing,
never a silently smaller mix. Unpaired parts are sampled (seeded) from their view's records.
An instance is written as a unit (``orig`` then its paired records), units in seeded order,
each record with its negatives selected by `dualview.data.negatives`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from dualview import __version__
from dualview.config import StrictModel
from dualview.data.manifest import file_sha256, write_manifest
from dualview.data.negatives import NegativeConfig, SelectionStats, select_negatives
from dualview.data.pairing import ExtraDv, pair_views
from dualview.data.record_index import Entry, RecordIndex
from dualview.data.schema import Record, View
from dualview.errors import ConfigError, DualviewError
from dualview.io.atomic import AtomicJsonlWriter
from dualview.progress import track


class MixPart(StrictModel):
    """One view's share of the mix."""

    view: View
    share: float = Field(gt=0)
    paired: bool = Field(False, description="dv/plain: the counterparts of the chosen orig")


class MixConfig(StrictModel):
    """A training mix (YAML: ``name``, ``size``, ``seed``, ``parts``, ``negatives``)."""

    name: str = "custom"
    size: int = Field(gt=0, description="total records before negative selection")
    seed: int = 0
    parts: list[MixPart] = Field(min_length=1)
    negatives: NegativeConfig = Field(default_factory=NegativeConfig)
    pool_size: int = Field(100_000, ge=0, description="documents kept for padding: random")
    # A second dv record for one orig: an error naming both lines, or which one to keep.
    extra_dv: ExtraDv = "error"

    @model_validator(mode="after")
    def _check_parts(self) -> MixConfig:
        views = [p.view for p in self.parts]
        if len(set(views)) != len(views):
            raise ValueError("parts: each view may appear once")
        for part in self.parts:
            if part.paired and part.view == "orig":
                raise ValueError("parts: an orig part cannot be paired (it is the base)")
            if part.paired and "orig" not in views:
                raise ValueError(f"parts: paired {part.view} part needs an orig part")
        return self


PRESETS: dict[str, tuple[tuple[str, float, bool], ...]] = {
    "ins-orig": (("orig", 1.0, False),),
    "ins-dv": (("orig", 0.5, False), ("dv", 0.5, True)),
    "all-orig": (("orig", 0.5, False), ("plain", 0.5, True)),
    "all-dv": (("orig", 0.5, False), ("dv", 0.5, True)),
    "orig+dv": (("orig", 0.5, False), ("dv", 0.5, True)),
}
PAPER_SIZES = {"ins-orig": 480_000, "ins-dv": 480_000, "all-orig": 880_000, "all-dv": 880_000}


def preset_config(name: str, size: int, seed: int = 0, **extra: Any) -> MixConfig:
    """The paper's configuration ``name`` at total ``size`` (even for the paired ones)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown mix preset {name!r}; choose from {sorted(PRESETS)}")
    parts = [MixPart(view=v, share=s, paired=p) for v, s, p in PRESETS[name]]  # type: ignore[arg-type]
    if len(parts) > 1 and size % 2:
        raise ConfigError(f"preset {name}: size must be even (N/2 + N/2), got {size}")
    return MixConfig(name=name, size=size, seed=seed, parts=parts, **extra)


def part_counts(config: MixConfig) -> dict[str, int]:
    """Records per view: shares scaled to ``size``, rounded by largest remainder (exact sum)."""
    total = sum(p.share for p in config.parts)
    exact = {p.view: config.size * p.share / total for p in config.parts}
    counts = {v: int(x) for v, x in exact.items()}
    leftover = config.size - sum(counts.values())
    by_remainder = sorted(exact, key=lambda v: (counts[v] - exact[v], v))
    for view in by_remainder[:leftover]:
        counts[view] += 1
    return counts


@dataclass
class Eligibility:
    """Which orig instances have a dv record / a plain counterpart."""

    dv: dict[str, Entry] = field(default_factory=dict)
    plain: dict[str, Entry] = field(default_factory=dict)
    pairing: dict[str, int | str] = field(default_factory=dict)

    def to_dict(self, orig: int) -> dict[str, int | str]:
        return {**self.pairing, "orig": orig, "orig_with_plain": len(self.plain)}


def find_counterparts(index: RecordIndex, extra_dv: ExtraDv = "error") -> Eligibility:
    """Map every orig id to its dv record (`dualview.data.pairing`, one rule for every
    stage) and to its plain counterpart."""

    def where(entry: Entry) -> str:
        return f"{index.sources[entry.source].path}:{entry.line}"

    pairing = pair_views(index.by_view("orig") + index.by_view("dv"), extra_dv, where)
    out = Eligibility(dv=pairing.dv_of, pairing=pairing.summary())
    origs = {e.id: e for e in pairing.origs}
    plains = {e.id: e for e in index.by_view("plain")}
    for orig in origs.values():
        if orig.counterpart_id in plains:
            out.plain[orig.id] = plains[orig.counterpart_id]
    for plain in plains.values():
        if plain.counterpart_id in origs and plain.counterpart_id not in out.plain:
            out.plain[plain.counterpart_id] = plain
    return out


@dataclass
class MixPlan:
    """The chosen records, grouped in units written together, in output order."""

    units: list[list[Entry]]
    counts: dict[str, int]
    eligibility: dict[str, int]


def _missing_error(config: MixConfig, view: str, need: int, have: int) -> DualviewError:
    what = {"dv": "a dual-view (dv) record", "plain": "a non-instruct (plain) counterpart"}
    return DualviewError(
        f"mix {config.name}: needs {need} orig instances with {what.get(view, view)}, "
        f"only {have} have one: {need - have} missing"
    )


def _sample(entries: Sequence[Entry], n: int, rng: random.Random) -> list[Entry]:
    ordered = sorted(entries, key=lambda e: e.id)
    rng.shuffle(ordered)
    return ordered[:n]


def plan_mix(index: RecordIndex, config: MixConfig) -> MixPlan:
    """Choose the records of ``config`` from ``index`` (see module docstring)."""
    counts = part_counts(config)
    rng = random.Random(config.seed)
    links = find_counterparts(index, config.extra_dv)
    origs = index.by_view("orig")
    order = [e.id for e in sorted(origs, key=lambda e: e.id)]
    rng.shuffle(order)
    paired = {p.view: counts[p.view] for p in config.parts if p.paired}
    picks: dict[str, list[str]] = {}
    for view, need in paired.items():
        eligible = links.dv if view == "dv" else links.plain
        picks[view] = [i for i in order if i in eligible][:need]
        if len(picks[view]) < need:
            raise _missing_error(config, view, need, len(picks[view]))
    n_orig = counts.get("orig", 0)
    pick_sets = {v: set(p) for v, p in picks.items()}
    core = [i for i in order if any(i in p for p in pick_sets.values())]
    if len(core) > n_orig:
        raise DualviewError(
            f"mix {config.name}: the paired parts need {len(core)} distinct orig instances "
            f"but the orig part has only {n_orig}; raise the orig share"
        )
    if len(origs) < n_orig:
        raise DualviewError(
            f"mix {config.name}: needs {n_orig} orig records, the inputs have {len(origs)}: "
            f"{n_orig - len(origs)} missing"
        )
    core_set = set(core)
    chosen = core + [i for i in order if i not in core_set][: n_orig - len(core)]
    units = [
        [index.entries[i]]
        + [(links.dv if v == "dv" else links.plain)[i] for v in paired if i in pick_sets[v]]
        for i in chosen
    ]
    used = {e.id for unit in units for e in unit}
    for part in config.parts:
        if part.view == "orig" or part.paired:
            continue
        pool = [e for e in index.by_view(part.view) if e.id not in used]
        need = counts[part.view]
        if len(pool) < need:
            raise DualviewError(
                f"mix {config.name}: needs {need} {part.view} records, the inputs have "
                f"{len(pool)} available: {need - len(pool)} missing"
            )
        units.extend([e] for e in _sample(pool, need, random.Random(f"{config.seed}:{part.view}")))
    rng.shuffle(units)
    return MixPlan(units, counts, links.to_dict(len(origs)))


@dataclass
class MixResult:
    """What a mix wrote: output path, counts per view, negative selection stats."""

    path: Path
    counts: dict[str, int]
    selection: SelectionStats
    manifest: dict[str, Any]


def write_mix(index: RecordIndex, plan: MixPlan, config: MixConfig, out: str | Path) -> MixResult:
    """Write the planned records with negatives selected, then the manifest beside ``out``."""
    out = Path(out)
    stats = SelectionStats()
    written: Counter = Counter()
    dropped_units = 0
    with AtomicJsonlWriter(out) as writer:
        for unit in track(plan.units, description=f"writing {config.name}"):
            selected = [_select(index, entry, config, stats) for entry in unit]
            if any(r is None for r in selected):  # padding: drop removes the whole instance
                dropped_units += 1
                continue
            for record in selected:
                writer.write(record)
                written[record.view] += 1
    manifest = {
        "kind": "dualview.mix",
        "dualview_version": __version__,
        "name": config.name,
        "seed": config.seed,
        "size": config.size,
        "config": config.model_dump(mode="json"),
        "planned": plan.counts,
        "counts": dict(sorted(written.items())),
        "records": sum(written.values()),
        "eligibility": plan.eligibility,
        "negatives": {**stats.to_dict(), "dropped_units": dropped_units},
        "sources": [s.to_dict() for s in index.sources],
        "output": {"file": out.name, "sha256": file_sha256(out)},
    }
    write_manifest(out, manifest)
    return MixResult(out, dict(written), stats, manifest)


def _select(
    index: RecordIndex, entry: Entry, config: MixConfig, stats: SelectionStats
) -> Record | None:
    record = index.load(entry)
    known = index.known_positives.for_record(record.id)
    return select_negatives(record, config.negatives, config.seed, known, index.pool, stats)


def build_mix(inputs: Sequence[str | Path], config: MixConfig, out: str | Path) -> MixResult:
    """Index ``inputs``, plan ``config``, write ``out`` and its manifest (the whole stage)."""
    with RecordIndex(inputs, pool_size=_pool_size(config), seed=config.seed) as index:
        plan = plan_mix(index, config)
        return write_mix(index, plan, config, out)


def _pool_size(config: MixConfig) -> int:
    return config.pool_size if config.negatives.padding == "random" else 0
