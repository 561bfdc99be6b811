"""Turn dual-view record pairs into evaluation sets (FollowIR layout, paired layout).

An ``orig`` record and its ``dv`` record (``dv.parent_id == orig.id``) describe the same
query under two instructions of opposite polarity, which is exactly what FollowIR-style
evaluation needs. Both exporters write atomically and are deterministic (input order).

FollowIR layout (``docs/architecture/eval.md``): one query per pair with
``instruction_og`` = orig instruction and ``instruction_changed`` = dv instruction;
``qrels_og``: orig positives 1, orig instruction negatives 0; ``qrels_changed``: dv
positives 1, the orig positives 0; ``top_ranked``: every document of both views.

Paired layout: side ``a`` = orig (satisfying = its positives, violating = its instruction
negatives), side ``b`` = dv, ``candidates`` = every document of both views, ``constraint`` =
``meta.constraint_type`` when the records carry one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dualview.data.gold import GOLD_DIR
from dualview.data.gold_folds import FOLDS_DIR, N_FOLDS, all_gold_records, domains_of, fold_records
from dualview.data.gold_validation import VAL, VAL_DIR, validation_records
from dualview.data.pairing import ExtraDv, pair_views
from dualview.data.schema import Document, Record
from dualview.errors import DualviewError
from dualview.io.atomic import atomic_write_text, write_jsonl


def dual_view_pairs(
    records: Iterable[Record], extra_dv: ExtraDv = "error"
) -> list[tuple[Record, Record]]:
    """``(orig, dv)`` pairs in the order of the orig records (`dualview.data.pairing`)."""
    pairs = pair_views(records, extra_dv).pairs
    if not pairs:
        raise DualviewError("no orig record has a dv record (dv.parent_id == orig.id)")
    return pairs


def _documents(pairs: list[tuple[Record, Record]]) -> dict[str, Document]:
    corpus: dict[str, Document] = {}
    for orig, dv in pairs:
        for doc in (*orig.documents(), *dv.documents()):
            corpus.setdefault(doc.id, doc)
    return corpus


def _candidates(orig: Record, dv: Record) -> list[str]:
    return list(dict.fromkeys(d.id for d in (*orig.documents(), *dv.documents())))


def _write_corpus(corpus: dict[str, Document], path: Path) -> None:
    write_jsonl(path, ({"_id": d.id, "title": d.title, "text": d.text} for d in corpus.values()))


def _write_qrels(path: Path, rows: list[tuple[str, str, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{s}" for q, d, s in rows)]
    atomic_write_text(path, "\n".join(lines) + "\n")


def export_followir(records: Iterable[Record], out_dir: str | Path) -> int:
    """Write a FollowIR-layout set to ``out_dir``; returns the number of queries."""
    out = Path(out_dir)
    pairs = dual_view_pairs(records)
    _write_corpus(_documents(pairs), out / "corpus.jsonl")
    write_jsonl(
        out / "queries.jsonl",
        (
            {
                "_id": orig.id,
                "text": orig.query,
                "instruction_og": orig.instruction,
                "instruction_changed": dv.instruction,
            }
            for orig, dv in pairs
        ),
    )
    qrels_og: list[tuple[str, str, int]] = []
    qrels_changed: list[tuple[str, str, int]] = []
    for orig, dv in pairs:
        qrels_og += [(orig.id, d.id, 1) for d in orig.positives]
        qrels_og += [(orig.id, d.id, 0) for d in orig.instruction_negatives]
        qrels_changed += [(orig.id, d.id, 1) for d in dv.positives]
        dv_positive_ids = {d.id for d in dv.positives}
        qrels_changed += [(orig.id, d.id, 0) for d in orig.positives if d.id not in dv_positive_ids]
    _write_qrels(out / "qrels_og" / "test.tsv", qrels_og)
    _write_qrels(out / "qrels_changed" / "test.tsv", qrels_changed)
    write_jsonl(
        out / "top_ranked.jsonl",
        ({"query-id": orig.id, "corpus-ids": _candidates(orig, dv)} for orig, dv in pairs),
    )
    return len(pairs)


def export_paired(records: Iterable[Record], out_dir: str | Path) -> int:
    """Write a paired-instruction set to ``out_dir``; returns the number of pairs."""
    out = Path(out_dir)
    pairs = dual_view_pairs(records)
    _write_corpus(_documents(pairs), out / "corpus.jsonl")

    def side(record: Record) -> dict:
        return {
            "instruction": record.instruction,
            "satisfying": [d.id for d in record.positives],
            "violating": [d.id for d in record.instruction_negatives],
        }

    rows = []
    for orig, dv in pairs:
        row = {"pair_id": orig.id, "query": orig.query, "a": side(orig), "b": side(dv)}
        if orig.meta.get("constraint_type"):
            row["constraint"] = orig.meta["constraint_type"]
        row["candidates"] = _candidates(orig, dv)
        rows.append(row)
    write_jsonl(out / "pairs.jsonl", rows)
    return len(pairs)


def write_fold_benchmarks(
    out_dir: str | Path = FOLDS_DIR, gold_dir: str | Path = GOLD_DIR, n_folds: int = N_FOLDS
) -> list[Path]:
    """Write each fold's held-out records as a paired evaluation set ``out_dir/ldo-K``; none
    when the set has fewer domains than folds."""
    if len(domains_of(all_gold_records(gold_dir))) < n_folds:
        return []
    out = []
    for fold in range(1, n_folds + 1):
        folder = Path(out_dir) / f"ldo-{fold}"
        export_paired(fold_records(fold, "test", gold_dir, n_folds), folder)
        out.append(folder)
    return out


def write_validation_benchmark(
    out_dir: str | Path = VAL_DIR, gold_dir: str | Path = GOLD_DIR
) -> Path | None:
    """Write the validation split of the gold train data (`dualview.data.gold_validation`)
    as a paired evaluation set ``out_dir`` (what ``-b gold-val`` reads); none (None) when
    the train split is too small to hold one out (a domain of one train instance keeps it)."""
    records = validation_records(VAL, gold_dir)
    if not records:
        return None
    export_paired(records, out_dir)
    return Path(out_dir)
