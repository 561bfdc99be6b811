"""Per-record negative selection, as the paper trains: instruction negatives first, then hard.

Every training record gets at most ``total`` (default 30) negatives:

1. **Instruction negatives first**: all available up to ``max_instruction_negatives`` (default
   3). Those that are a known positive of another view of the same instance (N* in an ``orig``
   record, P+ in its ``dv`` record) are always kept first, so both views share their documents;
   the rest follow in source order (or a seeded sample, ``instruction_negative_order:
   sample``). ``orig``/``dv`` records with fewer than ``min_instruction_negatives`` are counted
   in the stats (``below_min_instruction_negatives``), not dropped.
2. **Hard negatives** fill the remaining slots: in the order given (``ranked``: mined negatives
   come best first) or a seeded sample (``sample``). A hard negative that is a known positive of
   the instance family (see `KnownPositives`) is removed and counted.
3. **Padding** when fewer than ``total`` negatives exist (``padding``):

   - ``keep`` (default): keep the record with fewer negatives (the trainer's relation matrix
     masks the missing columns); counted as ``short``.
   - ``drop``: drop the record; counted as ``dropped``. This shrinks the mix below its size;
     a mix drops the whole instance (both views) so that pairs stay complete.
   - ``random``: fill with random passages from a pool (the mix draws it from all input
     documents), never a document of the record or a known positive of its family; counted
     as ``padded_records`` / ``padded_documents``. If the pool runs dry the record stays short.

Randomness is seeded by ``(seed, instance id)`` where the instance id is the ``orig`` id for
both an ``orig`` record and its ``dv`` record, so both views pick the same hard negatives and
the result does not depend on record order.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, model_validator

from dualview.config import StrictModel
from dualview.data.schema import Document, Record


class NegativeConfig(StrictModel):
    """How many negatives of each kind a training record keeps (see module docstring)."""

    total: int = Field(30, ge=0, description="negatives per record (the paper: 30)")
    max_instruction_negatives: int = Field(3, ge=0, description="the paper: 1-3, placed first")
    min_instruction_negatives: int = Field(1, ge=0, description="orig/dv below this are counted")
    instruction_negative_order: Literal["source", "sample"] = "source"
    hard_negative_order: Literal["ranked", "sample"] = "ranked"
    padding: Literal["keep", "drop", "random"] = "keep"

    @model_validator(mode="after")
    def _consistent(self) -> NegativeConfig:
        if self.min_instruction_negatives > self.max_instruction_negatives:
            raise ValueError("min_instruction_negatives is larger than max_instruction_negatives")
        if self.max_instruction_negatives > self.total:
            raise ValueError("max_instruction_negatives is larger than total")
        return self


def instance_id(record: Record) -> str:
    """The instance a record belongs to: the ``orig`` id for a ``dv`` record, else its own id."""
    return record.parent_id if record.view == "dv" and record.parent_id else record.id


def seeded_rng(seed: int, key: str) -> random.Random:
    """A random generator that depends only on ``seed`` and ``key`` (not on call order)."""
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class KnownPositives:
    """Positive document ids per instance family, for false-negative protection.

    A family joins records that share an instance or a query: an ``orig`` record, its ``dv``
    record(s) (``parent_id``), its non-instruct counterpart (``meta.counterpart_id``, either
    direction), and every record with the same query text. A document positive for any member
    must never become a hard negative of another member. Holds ids only (memory ~ records).
    """

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}
        self._positives: dict[str, list[str]] = {}
        self._frozen: dict[str, frozenset[str]] | None = None

    def _find(self, key: str) -> str:
        root = self._parent.setdefault(key, key)
        while root != self._parent[root]:
            root = self._parent[root]
        while key != root:  # path compression
            self._parent[key], key = root, self._parent[key]
        return root

    def _union(self, a: str, b: str) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)

    def add(
        self,
        record_id: str,
        positive_ids: Iterable[str],
        query: str,
        parent_id: str | None = None,
        counterpart_id: str | None = None,
    ) -> None:
        """Register one record (ids only, so an index can hold millions)."""
        self._frozen = None
        key = f"r:{record_id}"
        self._positives[key] = list(positive_ids)
        self._union(key, "q:" + " ".join(query.lower().split()))
        for other in (parent_id, counterpart_id):
            if other:
                self._union(key, f"r:{other}")

    def add_record(self, record: Record) -> None:
        counterpart = record.meta.get("counterpart_id")
        self.add(
            record.id,
            (d.id for d in record.positives),
            record.query,
            record.parent_id,
            str(counterpart) if counterpart else None,
        )

    def freeze(self) -> None:
        """Compute the per-family union (done lazily on the first lookup)."""
        families: dict[str, set[str]] = defaultdict(set)
        for key, ids in self._positives.items():
            families[self._find(key)].update(ids)
        self._frozen = {root: frozenset(ids) for root, ids in families.items()}

    def for_record(self, record_id: str) -> frozenset[str]:
        """Every known positive of the record's family (empty for an unknown record)."""
        if self._frozen is None:
            self.freeze()
        assert self._frozen is not None
        key = f"r:{record_id}"
        if key not in self._parent:
            return frozenset()
        return self._frozen.get(self._find(key), frozenset())


@dataclass
class SelectionStats:
    """Counts of what negative selection did; goes into the manifest."""

    records: int = 0
    kept: int = 0
    dropped: int = 0
    short: int = 0
    padded_records: int = 0
    padded_documents: int = 0
    below_min_instruction_negatives: int = 0
    known_positives_removed: int = 0
    instruction_negatives: Counter = field(default_factory=Counter)
    negatives: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "kept": self.kept,
            "dropped": self.dropped,
            "short": self.short,
            "padded_records": self.padded_records,
            "padded_documents": self.padded_documents,
            "below_min_instruction_negatives": self.below_min_instruction_negatives,
            "known_positives_removed": self.known_positives_removed,
            "instruction_negatives_per_record": {
                str(k): v for k, v in sorted(self.instruction_negatives.items())
            },
            "negatives_per_record": {str(k): v for k, v in sorted(self.negatives.items())},
        }


def _pick_instruction_negatives(
    record: Record, config: NegativeConfig, known: frozenset[str], rng: random.Random
) -> list[Document]:
    first = [d for d in record.instruction_negatives if d.id in known]
    rest = [d for d in record.instruction_negatives if d.id not in known]
    if config.instruction_negative_order == "sample":
        rest = rng.sample(rest, len(rest))
    return [*first, *rest][: config.max_instruction_negatives]


def _pick_hard_negatives(
    record: Record, config: NegativeConfig, known: frozenset[str], rng: random.Random, room: int
) -> tuple[list[Document], int]:
    allowed = [d for d in record.hard_negatives if d.id not in known]
    removed = len(record.hard_negatives) - len(allowed)
    if config.hard_negative_order == "sample":
        allowed = rng.sample(allowed, len(allowed))
    return allowed[:room], removed


def _pad(
    pool: Sequence[Document], exclude: set[str], needed: int, rng: random.Random
) -> list[Document]:
    """Up to ``needed`` random pool documents whose ids are not in ``exclude``."""
    out: list[Document] = []
    if not pool:
        return out
    for _ in range(4 * needed + 16):
        if len(out) == needed:
            break
        doc = pool[rng.randrange(len(pool))]
        if doc.id not in exclude:
            exclude.add(doc.id)
            out.append(doc)
    return out


def select_negatives(
    record: Record,
    config: NegativeConfig,
    seed: int,
    known_positives: frozenset[str] = frozenset(),
    pool: Sequence[Document] = (),
    stats: SelectionStats | None = None,
) -> Record | None:
    """The record with its negatives selected (see module docstring); ``None`` if dropped.

    Args:
        record: the input record (its lists are not modified).
        config: counts, orders and padding policy.
        seed: run seed; combined with the instance id for every random choice.
        known_positives: ids that must never be hard negatives (`KnownPositives`).
        pool: documents for ``padding: random``.
        stats: updated in place when given.
    """
    stats = stats if stats is not None else SelectionStats()
    stats.records += 1
    rng = seeded_rng(seed, instance_id(record))
    instruction = _pick_instruction_negatives(record, config, known_positives, rng)
    if record.view != "plain" and len(instruction) < config.min_instruction_negatives:
        stats.below_min_instruction_negatives += 1
    room = config.total - len(instruction)
    hard, removed = _pick_hard_negatives(record, config, known_positives, rng, room)
    stats.known_positives_removed += removed
    missing = room - len(hard)
    if missing > 0 and config.padding == "drop":
        stats.dropped += 1
        return None
    if missing > 0 and config.padding == "random":
        exclude = {d.id for d in record.documents()} | set(known_positives)
        padding = _pad(pool, exclude, missing, rng)
        if padding:
            stats.padded_records += 1
            stats.padded_documents += len(padding)
        hard = [*hard, *padding]
        missing -= len(padding)
    if missing > 0:
        stats.short += 1
    stats.kept += 1
    stats.instruction_negatives[len(instruction)] += 1
    stats.negatives[len(instruction) + len(hard)] += 1
    return record.model_copy(update={"instruction_negatives": instruction, "hard_negatives": hard})
