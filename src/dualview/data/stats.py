"""Dataset statistics: views, instruction negatives per record, duplicate ids, token lengths."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dualview.data.schema import Record

Tokenizer = Callable[[str], int]
PERCENTILES = (50, 90, 95, 99, 100)


def whitespace_tokens(text: str) -> int:
    return len(text.split())


def hf_token_counter(tokenizer: Any) -> Tokenizer:
    """Token counter from a loaded Hugging Face tokenizer (special tokens not counted); load
    it with `dualview.models.pretrained.from_pretrained` for one located error."""
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class DatasetStats:
    records: int = 0
    views: Counter = field(default_factory=Counter)
    instruction_negatives_hist: Counter = field(default_factory=Counter)
    hard_negatives_hist: Counter = field(default_factory=Counter)
    duplicate_record_ids: list[str] = field(default_factory=list)
    query_lengths: list[int] = field(default_factory=list)
    instruction_lengths: list[int] = field(default_factory=list)
    document_lengths: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "views": dict(sorted(self.views.items())),
            "instruction_negatives_per_record": dict(
                sorted(self.instruction_negatives_hist.items())
            ),
            "hard_negatives_per_record": dict(sorted(self.hard_negatives_hist.items())),
            "duplicate_record_ids": len(self.duplicate_record_ids),
            "duplicate_record_id_examples": self.duplicate_record_ids[:10],
            "length_percentiles": {
                "query": percentiles(self.query_lengths),
                "instruction": percentiles(self.instruction_lengths),
                "document": percentiles(self.document_lengths),
            },
        }


def percentiles(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    array = np.asarray(values)
    return {f"p{p}": float(np.percentile(array, p)) for p in PERCENTILES}


def compute_stats(
    records: Iterable[Record], count_tokens: Tokenizer = whitespace_tokens
) -> DatasetStats:
    """One pass over ``records``; each distinct document's length is counted once."""
    stats = DatasetStats()
    seen_records: set[str] = set()
    seen_docs: set[str] = set()
    for record in records:
        stats.records += 1
        stats.views[record.view] += 1
        stats.instruction_negatives_hist[len(record.instruction_negatives)] += 1
        stats.hard_negatives_hist[len(record.hard_negatives)] += 1
        if record.id in seen_records:
            stats.duplicate_record_ids.append(record.id)
        seen_records.add(record.id)
        stats.query_lengths.append(count_tokens(record.query))
        if record.instruction:
            stats.instruction_lengths.append(count_tokens(record.instruction))
        for doc in record.documents():
            if doc.id not in seen_docs:
                seen_docs.add(doc.id)
                stats.document_lengths.append(count_tokens(f"{doc.title} {doc.text}".strip()))
    return stats
