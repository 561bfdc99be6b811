"""The validation split of the gold train data: the only gold data any choice is made on.

Choices (the step budget, τ, the view policy, which checkpoint) are made on a validation
split of the gold *train* instances; the gold test split and the phenomenon set are reported,
never selected on (`dualview.eval.selection` refuses a sweep that selects on them).

The split is **by instance**, stratified like the train/test split (`dualview.data.gold.
assign_splits` with its own salt): each domain gives ``ceil(VAL_FRACTION * n)`` of its ``n``
train instances to validation, constraint types balanced over the validation split. By
instance rather than by domain, because the choices it serves are made for in-distribution
training: a by-domain split would hold out one or two whole domains of ten, so every domain
would be missing from either the fitted model or the validation set, and a validation set of
two domains measures those domains' difficulty more than the setting. (The leave-domains-out
folds, `dualview.data.gold_folds`, are for measuring transfer to unseen domains, not for
choosing.) The rule depends only on the instance ids, domains and constraint types, so the
split is the same on every machine and changes only when the gold train split does.

Names, usable wherever a gold split is (``instructions.path: gold:fit``):

- ``fit``: the orig and dv records of the train instances not in validation (train on it);
- ``val``: those of the validation instances (select on it).

The ``val`` side is also bundled as a paired evaluation set (``dualview/data/gold/val``:
``corpus.jsonl`` + ``pairs.jsonl``), read by ``-b gold-val``
(`dualview.eval.benchmarks.gold_val`); `dualview.eval.export.write_validation_benchmark`
rebuilds it (``dualview data gold-build`` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dualview.data.gold import GOLD_DIR, assign_splits, load_gold
from dualview.data.schema import Record
from dualview.errors import DataError

VAL_FRACTION = 0.2
VAL_SALT = "gold-validation"
FIT, VAL = "fit", "val"
VALIDATION_NAMES: tuple[str, ...] = (FIT, VAL)
VAL_DIR = GOLD_DIR / "val"


@dataclass(frozen=True)
class _Unit:
    """An instance as `assign_splits` reads it, taken from its records' ``meta``."""

    instance: str
    domain: str
    constraint_type: str


def _units(records: list[Record], where: Path) -> list[_Unit]:
    units: dict[str, _Unit] = {}
    for record in records:
        meta = record.meta
        missing = [k for k in ("instance", "domain", "constraint_type") if not meta.get(k)]
        if missing:
            raise DataError(where, None, f"meta.{missing[0]}", f"record {record.id} has none")
        units.setdefault(
            meta["instance"], _Unit(meta["instance"], meta["domain"], meta["constraint_type"])
        )
    return list(units.values())


def validation_assignment(
    records: list[Record], fraction: float = VAL_FRACTION, where: Path = GOLD_DIR
) -> dict[str, str]:
    """Instance id -> ``fit`` or ``val`` for the gold train ``records`` (module docstring)."""
    return assign_splits(_units(records, where), fraction, salt=VAL_SALT, names=(FIT, VAL))


def validation_records(part: str, gold_dir: str | Path = GOLD_DIR) -> list[Record]:
    """The gold train records of ``part`` (``fit`` or ``val``), in file order."""
    if part not in VALIDATION_NAMES:
        raise ValueError(f"unknown validation part {part!r}; expected one of {VALIDATION_NAMES}")
    train = load_gold("train", gold_dir)
    side = validation_assignment(train, where=Path(gold_dir) / "train.jsonl")
    return [r for r in train if side[r.meta["instance"]] == part]
