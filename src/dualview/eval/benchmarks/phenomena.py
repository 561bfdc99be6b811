"""The bundled phenomenon set (query-side polarity and negation) as a paired benchmark.

``-b phenomena`` reads the hand-written set shipped in ``dualview/data/phenomena``
(`dualview.data.phenomena`, card: ``data/phenomena/CARD.md``); ``-b phenomena:negation``
keeps one phenomenon; ``-b phenomena=PATH`` reads another folder of the same layout. The
queries carry no instruction: the two sides of a pair differ in their query. Scored like
`PairedInstructions`, with each metric also per phenomenon.
"""

from __future__ import annotations

from pathlib import Path

from dualview.data.phenomena import PHENOMENA_DIR
from dualview.eval.benchmarks.base import BenchmarkMeta
from dualview.eval.benchmarks.meta import MtebTasks, ReportColumn
from dualview.eval.benchmarks.paired import OWN_BENCHMARK, PairedInstructions


class Phenomena(PairedInstructions):
    """Instruction-free query pairs that flip polarity or add a negation (module docstring)."""

    meta = BenchmarkMeta(
        name="phenomena",
        description="Hand-written query pairs whose meaning flips inside the query "
        "(polarity, negation), each query with a satisfying and a violating passage; "
        "evaluation only",
        reference="src/dualview/data/phenomena/CARD.md",
        main_score="p-MRR",
        columns=(
            ReportColumn(metric="p-MRR", scale="percent"),
            # per query: what the error analysis (flips) reads
            ReportColumn(metric="pairwise accuracy", scale="percent"),
            ReportColumn(metric="nDCG@10"),
            ReportColumn(metric="polarity/p-MRR", scale="percent"),
            ReportColumn(metric="polarity/nDCG@10"),
            ReportColumn(metric="negation/p-MRR", scale="percent"),
            ReportColumn(metric="negation/nDCG@10"),
        ),
        pairing="instruction_pairs",
        mteb=MtebTasks(skip=OWN_BENCHMARK),
        role="held_out",  # its card: evaluation only, never used to choose between methods
    )
    bundled_path = PHENOMENA_DIR

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        super().__init__(self.bundled_path if path is None else path, subsets)
