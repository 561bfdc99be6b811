"""Review items: one synthesized dual view as a reviewer sees it, and where items come from.

A source is a record file (its ``dv`` records are the items), a run folder (the synthesis
stage's ``dv.jsonl``, with the verification stage as the judge when the run has one) or the
gold set (``gold:SPLIT``: each gold reversal, expected valid, and its negative control, the
original instruction posing as the reversal, expected invalid; see
`dualview.data.gold_pairs.negative_control`; their item ids are opaque hashes, so neither the
id nor the stratum, the domain, gives the expected verdict away). Files are streamed twice
(strata, then the sampled records), so a sample of 100 from a file of 240k records holds 100
records in memory.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dualview.data.jsonl import iter_records
from dualview.data.schema import Document, Record
from dualview.errors import DataError
from dualview.io.files import iter_json_lines
from dualview.review.sample import stratified_sample
from dualview.run_folder import read_stage_index

GOLD_PREFIX = "gold:"


@dataclass(frozen=True)
class ReviewItem:
    """What the page shows for one dual view, and what a verdict line copies from it."""

    id: str
    query: str
    orig_instruction: str
    instruction: str
    n_star: Document
    p_plus: Document | None
    others: list[Document] = field(default_factory=list)
    stratum: str = "all"
    judge: str | None = None  # "valid" (the judge kept it) | "invalid" | None (not judged)
    judge_reason: str = ""
    expected: str | None = None  # gold mode: the known right verdict (hidden from the page)
    record_id: str = ""  # gold mode: the record behind the opaque item id

    def snapshot(self) -> dict[str, Any]:
        """The item fields a verdict line carries, so statistics need only the verdict file."""
        return {
            "item": self.id,
            "stratum": self.stratum,
            "judge": self.judge,
            "expected": self.expected,
            **({"record_id": self.record_id} if self.record_id else {}),
        }


@dataclass(frozen=True)
class ReviewSet:
    """A sampled list of items, the verdict file they go to, and how they were chosen."""

    items: list[ReviewItem]
    verdicts: Path
    source: str
    population: int
    seed: int


def stratum_of(record: Record, key: str) -> str:
    """The stratum label: ``meta[key]``; ``auto`` = domain, else source; ``none`` = one stratum."""
    if key == "none":
        return "all"
    if key == "auto":
        return str(record.meta.get("domain") or record.meta.get("source") or "all")
    return str(record.meta.get(key) or "unknown")


def _is_item(record: Record) -> bool:
    return record.view == "dv" and bool(record.instruction_negatives)


def to_item(record: Record, parent: Record | None, stratum: str, **extra: Any) -> ReviewItem:
    """The review item of a dual-view record (P+ from ``meta.orig_positive_id`` or the parent)."""
    p_id = record.meta.get("orig_positive_id") or (parent.positives[0].id if parent else None)
    negatives = list(record.instruction_negatives)
    p_plus = next((d for d in negatives if d.id == p_id), None)
    if p_plus is None and p_id is None:
        p_plus = negatives[0]
    orig = record.meta.get("orig_instruction") or (parent.instruction if parent else "")
    return ReviewItem(
        id=record.id,
        query=record.query,
        orig_instruction=str(orig),
        instruction=record.instruction,
        n_star=record.positives[0],
        p_plus=p_plus,
        others=[d for d in negatives if d is not p_plus],
        stratum=stratum,
        **extra,
    )


def judge_verdicts(kept: Path) -> dict[str, tuple[str, str]]:
    """``{record id: (verdict, reason)}`` from a ``dualview verify`` output: records in ``kept``
    passed, units in ``kept.dropped.jsonl`` with status ``rejected`` failed."""
    if not kept.is_file():
        raise DataError(kept, None, "judge", "not a verify output file")
    out: dict[str, tuple[str, str]] = {}
    for _, row in iter_json_lines(kept):
        out[str(row.get("id"))] = ("valid", "")
    dropped = kept.with_name(kept.name + ".dropped.jsonl")
    for _, row in iter_json_lines(dropped) if dropped.exists() else []:
        if row.get("status") == "rejected":
            for rid in row.get("unit_ids") or [row.get("id")]:
                out[str(rid)] = ("invalid", str(row.get("reason") or ""))
    return out


def run_files(run: Path) -> tuple[Path, Path | None]:
    """The dual views of a run folder and its verification output (None without one)."""
    stages = read_stage_index(run)
    source_stage = "synth" if "synth" in stages else "data"
    dv = run / stages.get(source_stage, "") / "dv.jsonl"
    if not dv.is_file():
        raise DataError(dv, None, "file", "the run has no dual views yet")
    kept = run / stages["verify"] / "kept.jsonl" if "verify" in stages else None
    return dv, kept if kept is not None and kept.is_file() else None


def _file_items(
    path: Path, n: int, seed: int, stratify: str, judge: Path | None
) -> tuple[list[ReviewItem], int]:
    strata = [stratum_of(r, stratify) for r in iter_records(path) if _is_item(r)]
    picked = stratified_sample(strata, n, seed)
    wanted = set(picked)
    chosen: dict[int, Record] = {}
    for index, record in enumerate(r for r in iter_records(path) if _is_item(r)):
        if index in wanted:
            chosen[index] = record
    parents_needed = {r.parent_id for r in chosen.values() if "orig_instruction" not in r.meta}
    parents = (
        {r.id: r for r in iter_records(path) if r.id in parents_needed}
        if any(parents_needed)
        else {}
    )
    verdicts = judge_verdicts(judge) if judge else {}
    items = []
    for index in picked:
        record = chosen[index]
        verdict, reason = verdicts.get(record.id, (None, ""))
        items.append(
            to_item(
                record,
                parents.get(record.parent_id or ""),
                strata[index],
                judge=verdict,
                judge_reason=reason,
            )
        )
    return items, len(strata)


def _gold_items(split: str, n: int, seed: int, judge: Path | None) -> tuple[list[ReviewItem], int]:
    from dualview.data.gold import load_gold
    from dualview.data.gold_pairs import gold_pairs, negative_control

    verdicts = judge_verdicts(judge) if judge else {}
    pool: list[ReviewItem] = []
    for orig, dv in gold_pairs(load_gold(split), f"gold:{split}"):
        domain = str(dv.meta.get("domain") or "all")
        for record, expected in ((dv, "valid"), (negative_control((orig, dv)), "invalid")):
            verdict, reason = verdicts.get(record.id, (None, ""))
            item = to_item(
                record, orig, domain, judge=verdict, judge_reason=reason, expected=expected
            )
            # The page must not give the answer away: an opaque id, the record id kept aside.
            opaque = "g-" + hashlib.sha256(record.id.encode()).hexdigest()[:12]
            pool.append(replace(item, id=opaque, record_id=record.id))
    # Half gold, half control, each stratified by domain, then one seeded order.
    chosen: list[ReviewItem] = []
    for expected, share in (("valid", n - n // 2), ("invalid", n // 2)):
        part = [i for i in pool if i.expected == expected]
        chosen += [part[i] for i in stratified_sample([i.stratum for i in part], share, seed)]
    random.Random(f"{seed}:gold-order").shuffle(chosen)
    return chosen, len(pool)


def default_verdicts(source: str) -> Path:
    """Where verdicts go: ``FILE.review.jsonl`` beside a file, ``RUN/review.jsonl`` in a run
    folder, ``review-gold-SPLIT.jsonl`` in the working folder for the gold set."""
    if source.startswith(GOLD_PREFIX):
        return Path(f"review-gold-{source[len(GOLD_PREFIX) :]}.jsonl")
    path = Path(source)
    return path / "review.jsonl" if path.is_dir() else path.with_name(path.name + ".review.jsonl")


def load_review_set(
    source: str,
    n: int = 100,
    seed: int = 0,
    stratify: str = "auto",
    judge: Path | None = None,
    verdicts: Path | None = None,
) -> ReviewSet:
    """The sampled items of ``source`` (file, run folder or ``gold:SPLIT``)."""
    if source.startswith(GOLD_PREFIX):
        items, population = _gold_items(source[len(GOLD_PREFIX) :], n, seed, judge)
    else:
        path = Path(source)
        if path.is_dir():
            path, run_judge = run_files(path)
            judge = judge or run_judge
        items, population = _file_items(path, n, seed, stratify, judge)
    if not items:
        raise DataError(source, None, "records", "no dual-view records to review")
    return ReviewSet(items, verdicts or default_verdicts(source), source, population, seed)


def iter_item_docs(item: ReviewItem) -> Iterator[tuple[str, Document]]:
    """The passages of an item with their roles, in display order."""
    yield "N*", item.n_star
    if item.p_plus is not None:
        yield "P+", item.p_plus
    for doc in item.others:
        yield "other", doc


def to_markdown(items: list[ReviewItem]) -> str:
    """The items as Markdown for offline reading: query, both instructions, every passage."""
    out = []
    for number, item in enumerate(items, 1):
        out += [
            f"## {number}. `{item.id}` ({item.stratum})",
            "",
            f"- query: {item.query}",
            f"- original: {item.orig_instruction}",
            f"- reversed: {item.instruction}",
            "",
        ]
        for role, doc in iter_item_docs(item):
            out.append(f"**{role}** {doc.title}: {doc.text}\n")
    return "\n".join(out)
