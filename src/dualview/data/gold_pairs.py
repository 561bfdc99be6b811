"""The gold set as (orig, dv) pairs, and the negative controls made from them.

bench-synth and the human review both read the gold set pair by pair; both pair through
`dualview.data.pairing.pair_views` (one rule for every stage), and the gold set must give
every orig exactly one dv.
"""

from __future__ import annotations

from collections.abc import Iterable

from dualview.data.pairing import pair_views
from dualview.data.schema import Record
from dualview.errors import DataError

GoldPair = tuple[Record, Record]


def gold_pairs(records: Iterable[Record], source: str = "gold") -> list[GoldPair]:
    """(orig, dv) pairs of a gold split, in file order; every orig needs exactly one dv."""
    pairing = pair_views(records)
    missing = pairing.unpaired
    if missing:
        raise DataError(source, None, "parent_id", f"no dv record for {missing[0].id}")
    return pairing.pairs


def negative_control(pair: GoldPair) -> Record:
    """The original instruction presented as if it were the reversal: a lone dv record whose
    positive is N* under the *original* instruction (a sound judge must not pick N*)."""
    orig, dv = pair
    return dv.model_copy(
        update={
            "id": f"{orig.id}-control",
            "instruction": orig.instruction,
            "meta": {**dv.meta, "bench": "negative_control"},
        }
    )
