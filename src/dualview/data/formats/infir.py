"""InF-IR rows: ``query_positive``, ``instruction_positive``, ``document_positive``,
``query_negative``, ``instruction_negative``, ``hard_negative_document_1``,
``hard_negative_document_2``.

One row holds three tuples: (I+, Q+, P+) positive, (I-, Q+, P1-) and (I+, Q-, P2-). Each row
becomes three records, all sharing the same three documents:

- ``<id>``: ``orig`` (I+, Q+): positive P+, instruction negative P1-, hard negative P2-;
- ``<id>-ineg``: ``dv`` (I-, Q+): positive P1-, instruction negative P+ (the poisoned
  instruction is exactly a reversed-polarity instruction), hard negative P2-;
- ``<id>-qneg``: ``orig`` (I+, Q-): positive P2-, hard negatives P+ and P1-.

``meta.infir_role`` says which tuple a record is (``positive``, ``instruction_negative``,
``query_negative``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dualview.data.formats.common import build_record, map_rows, passage_to_document, require_str
from dualview.data.schema import Record


def convert_row(row: dict[str, Any], path: str | Path, line: int) -> list[Record]:
    q_pos = require_str(row, "query_positive", path, line)
    i_pos = require_str(row, "instruction_positive", path, line)
    q_neg = require_str(row, "query_negative", path, line)
    i_neg = require_str(row, "instruction_negative", path, line)
    p_pos = passage_to_document(row.get("document_positive"), path, line, "document_positive")
    p1 = passage_to_document(
        row.get("hard_negative_document_1"), path, line, "hard_negative_document_1"
    )
    p2 = passage_to_document(
        row.get("hard_negative_document_2"), path, line, "hard_negative_document_2"
    )
    base = str(row.get("id") or row.get("_id") or f"infir-{line}")
    common = {"source": "infir"}
    return [
        build_record(
            path,
            line,
            id=base,
            view="orig",
            query=q_pos,
            instruction=i_pos,
            positives=[p_pos],
            instruction_negatives=[p1],
            hard_negatives=[p2],
            meta={**common, "infir_role": "positive"},
        ),
        build_record(
            path,
            line,
            id=f"{base}-ineg",
            parent_id=base,
            view="dv",
            query=q_pos,
            instruction=i_neg,
            positives=[p1],
            instruction_negatives=[p_pos],
            hard_negatives=[p2],
            meta={**common, "infir_role": "instruction_negative"},
        ),
        build_record(
            path,
            line,
            id=f"{base}-qneg",
            view="orig",
            query=q_neg,
            instruction=i_pos,
            positives=[p2],
            hard_negatives=[p_pos, p1],
            meta={**common, "infir_role": "query_negative", "infir_parent": base},
        ),
    ]


def read(path: str | Path) -> Iterator[Record]:
    return map_rows(path, lambda row, line: iter(convert_row(row, path, line)))
