"""Leave-domains-out folds of the gold set: train on 8 domains, test on the 2 unseen ones.

The 10 gold domains, sorted by name, are cut into 5 folds of 2 consecutive domains (fold 1:
education + finance, fold 2: food + health, ...). Fold ``k`` trains on every instance (the
fixed train *and* test split) of the other 8 domains and tests on every instance of its 2.
So each instance is tested exactly once over the 5 folds, and never by a model that saw its
domain.

Names, usable wherever a gold split is (``instructions.path: gold:ldo-3-train``; the
validation split's ``gold:fit`` / ``gold:val`` are read here too, see
`dualview.data.gold_validation`):

- ``ldo-K-train``: the orig and dv records of the training domains of fold ``K``;
- ``ldo-K-test``: those of its held-out domains.

The held-out sides are also bundled as paired evaluation sets
(``dualview/data/gold/folds/ldo-K``: ``corpus.jsonl`` + ``pairs.jsonl``, the layout of
`dualview.eval.export.export_paired`) so that an experiment evaluates a fold with
``paired=src/dualview/data/gold/folds/ldo-K``;
`dualview.eval.export.write_fold_benchmarks` rebuilds them (``dualview data gold-build``
does after the splits).
"""

from __future__ import annotations

import re
from pathlib import Path

from dualview.data.gold import GOLD_DIR, SPLITS, load_gold, split_path
from dualview.data.gold_validation import VALIDATION_NAMES, validation_records
from dualview.data.schema import Record
from dualview.errors import ConfigError

N_FOLDS = 5
FOLDS_DIR = GOLD_DIR / "folds"
_FOLD_NAME = re.compile(r"^ldo-(\d+)-(train|test)$")


def all_gold_records(gold_dir: str | Path = GOLD_DIR) -> list[Record]:
    """Every gold record (both fixed splits), in file order."""
    return [r for split in SPLITS for r in load_gold(split, gold_dir)]


def domains_of(records: list[Record]) -> list[str]:
    """The sorted gold domains of ``records``."""
    return sorted({str(r.meta.get("domain")) for r in records})


def held_out_domains(fold: int, domains: list[str], n_folds: int = N_FOLDS) -> list[str]:
    """The domains fold ``fold`` (1-based) tests on: the ``fold``-th of ``n_folds`` consecutive
    chunks of the sorted domains (sizes differ by at most one)."""
    if not 1 <= fold <= n_folds:
        raise ConfigError(f"leave-domains-out fold {fold}: expected 1..{n_folds}")
    if len(domains) < n_folds:
        raise ConfigError(f"{n_folds} folds need at least {n_folds} domains, got {len(domains)}")
    base, extra = divmod(len(domains), n_folds)
    start = (fold - 1) * base + min(fold - 1, extra)
    size = base + (1 if fold - 1 < extra else 0)
    return domains[start : start + size]


def fold_records(
    fold: int, part: str, gold_dir: str | Path = GOLD_DIR, n_folds: int = N_FOLDS
) -> list[Record]:
    """The records of fold ``fold``'s ``part`` (``"train"``: the other domains; ``"test"``:
    the held-out ones)."""
    if part not in ("train", "test"):
        raise ConfigError(f"leave-domains-out part {part!r}: expected train or test")
    records = all_gold_records(gold_dir)
    held = set(held_out_domains(fold, domains_of(records), n_folds))
    return [r for r in records if (r.meta.get("domain") in held) == (part == "test")]


def parse_fold_name(name: str) -> tuple[int, str] | None:
    """``"ldo-3-train"`` -> ``(3, "train")``; a plain split name -> ``None``."""
    match = _FOLD_NAME.match(name)
    return (int(match.group(1)), match.group(2)) if match else None


def gold_source_files(name: str) -> list[Path]:
    """The files a gold source (``train``, ``test``, ``ldo-K-part``, or the validation
    split's ``fit`` / ``val``) is read from."""
    if parse_fold_name(name) is not None:
        return [split_path(s) for s in SPLITS]
    if name in VALIDATION_NAMES:
        return [split_path("train")]
    return [split_path(name)]


def load_gold_source(name: str) -> list[Record]:
    """Records of a gold source name (see `gold_source_files`)."""
    parsed = parse_fold_name(name)
    if parsed is not None:
        return fold_records(*parsed)
    if name in VALIDATION_NAMES:
        return validation_records(name)
    return load_gold(name)
