"""The orig/dv pairing: which dual-view record belongs to which original, by one rule.

A ``dv`` record names its original through ``parent_id``. `pair_views` matches them for
every stage that needs the pairs (mix, evaluation export, bench-synth, review, the
pipeline's verify stage), so all of them see the same views.

**The rule for a second dv of the same orig:** it is an error naming both records (their
files and lines where known) unless ``extra_dv`` picks one explicitly: ``first`` keeps the
first in input order, ``last`` the last. The chosen policy and how many were set aside are
reported in `Pairing`, so a stage can record it. A dv whose ``parent_id`` names no orig is
an *orphan*: counted, never paired.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from dualview.data.jsonl import iter_numbered_records
from dualview.data.schema import Record
from dualview.errors import DualviewError

ExtraDv = Literal["error", "first", "last"]
EXTRA_DV_CHOICES: tuple[str, ...] = ("error", "first", "last")


class Viewed(Protocol):
    """What pairing reads of a record (a `Record` or an index entry)."""

    @property
    def id(self) -> str: ...

    @property
    def view(self) -> str: ...

    @property
    def parent_id(self) -> str | None: ...


T = TypeVar("T", bound=Viewed)


class ExtraDvError(DualviewError):
    """Two dv records name the same orig and no ``extra_dv`` policy chose between them."""


@dataclass
class Pairing(Generic[T]):
    """The result of `pair_views`: pairs in the order of the orig records."""

    pairs: list[tuple[T, T]]
    origs: list[T]
    orphans: list[T] = field(default_factory=list)  # dv records whose orig is absent
    extra: list[T] = field(default_factory=list)  # dv records set aside by the policy
    policy: ExtraDv = "error"

    @property
    def dv_of(self) -> dict[str, T]:
        """orig id -> its dv record."""
        return {orig.id: dv for orig, dv in self.pairs}

    @property
    def unpaired(self) -> list[T]:
        """Orig records without a dv record."""
        paired = {orig.id for orig, _ in self.pairs}
        return [o for o in self.origs if o.id not in paired]

    def summary(self) -> dict[str, int | str]:
        """Counts for a manifest or stats file."""
        return {
            "orig": len(self.origs),
            "orig_with_dv": len(self.pairs),
            "dv_without_orig": len(self.orphans),
            "dv_extra_set_aside": len(self.extra),
            "extra_dv_policy": self.policy,
        }


def _describe(record: T, where: Callable[[T], str] | None) -> str:
    place = where(record) if where is not None else ""
    return f"{place} (id {record.id!r})" if place else f"id {record.id!r}"


def pair_views(
    records: Iterable[T],
    extra_dv: ExtraDv = "error",
    where: Callable[[T], str] | None = None,
) -> Pairing[T]:
    """Match every ``dv`` record to the ``orig`` record its ``parent_id`` names.

    ``where(record)`` names a record's place (``FILE:LINE``) for the error message; records
    of other views (``plain``) are ignored. See the module docstring for ``extra_dv``.
    """
    if extra_dv not in EXTRA_DV_CHOICES:
        raise DualviewError(f"extra_dv must be one of {', '.join(EXTRA_DV_CHOICES)}")
    origs: dict[str, T] = {}
    dvs: dict[str, T] = {}
    extra: list[T] = []
    pending: list[T] = []
    for record in records:
        if record.view == "orig":
            origs.setdefault(record.id, record)
        elif record.view == "dv" and record.parent_id:
            pending.append(record)
    orphans = [r for r in pending if r.parent_id not in origs]
    for record in pending:
        parent = record.parent_id
        if parent not in origs:
            continue
        if parent not in dvs:
            dvs[parent] = record
            continue
        if extra_dv == "error":
            raise ExtraDvError(
                f"two dv records for orig {parent!r}: {_describe(dvs[parent], where)} and "
                f"{_describe(record, where)}; keep one, or choose with extra_dv "
                "(--extra-dv first|last)"
            )
        if extra_dv == "last":
            extra.append(dvs[parent])
            dvs[parent] = record
        else:
            extra.append(record)
    pairs = [(orig, dvs[oid]) for oid, orig in origs.items() if oid in dvs]
    return Pairing(pairs, list(origs.values()), orphans, extra, extra_dv)


def read_pairs(paths: Sequence[str | Path], extra_dv: ExtraDv = "error") -> Pairing[Record]:
    """`pair_views` over the records of ``paths`` (JSONL), naming ``FILE:LINE`` in errors."""
    places: dict[int, str] = {}
    records: list[Record] = []
    for path in paths:
        for line, record in iter_numbered_records(path):
            places[id(record)] = f"{path}:{line}"
            records.append(record)
    return pair_views(records, extra_dv, lambda r: places.get(id(r), ""))
