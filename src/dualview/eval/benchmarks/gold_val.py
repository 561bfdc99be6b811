"""The validation split of the gold train data as a paired benchmark (``-b gold-val``).

Reads ``dualview/data/gold/val`` (`dualview.data.gold_validation`: the validation
instances of the gold train split, by instance, in the paired layout of
`dualview.eval.benchmarks.paired`); ``-b gold-val=PATH`` reads another folder of that
layout. Scored like ``paired``, under its own column names (``gold-val p-MRR``), so one
evaluation carries both the validation set and the gold test split (``paired=...``). It is
the benchmark a sweep's ``select:`` chooses on (role ``validation``): a model trained on
``gold:fit`` has never seen it.
"""

from __future__ import annotations

from pathlib import Path

from dualview.data.gold_validation import VAL_DIR
from dualview.eval.benchmarks.paired import PairedInstructions


class GoldValidation(PairedInstructions):
    """The gold train data's validation split (module docstring)."""

    meta = PairedInstructions.meta.model_copy(
        update={
            "name": "gold-val",
            "description": "The validation split of the gold train data (by instance): the "
            "set that steps, temperature, view policy and checkpoints are chosen on",
            "reference": "src/dualview/data/gold_validation.py",
            "role": "validation",
        }
    )
    bundled_path = VAL_DIR

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        super().__init__(self.bundled_path if path is None else path, subsets)
