"""The shipped gold set: loads through the record schema, is up to date, and its card is true."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from dualview.data import gold
from dualview.data.gold_card import card_counts_block, compute_counts, render_counts


@pytest.fixture(scope="module")
def records() -> dict[str, list]:
    return {split: gold.load_gold(split) for split in gold.SPLITS}


def test_every_record_validates_and_views_pair_up(records) -> None:
    by_id = {r.id: r for split in records.values() for r in split}
    origs = [r for r in by_id.values() if r.view == "orig"]
    dvs = [r for r in by_id.values() if r.view == "dv"]
    assert origs and len(origs) == len(dvs)
    for dv in dvs:
        orig = by_id[dv.parent_id]
        assert orig.meta["split"] == dv.meta["split"] and orig.query == dv.query
        assert dv.instruction != orig.instruction
        assert [d.id for d in dv.positives] == [orig.meta["n_star"]]
        assert orig.positives[0] in dv.instruction_negatives
        assert {d.id for d in orig.documents()} == {d.id for d in dv.documents()}
        assert len(orig.hard_negatives) >= 5


def test_card_and_counts_match_the_files(records) -> None:
    counts = compute_counts(records)
    assert json.loads((gold.GOLD_DIR / "counts.json").read_text()) == counts
    assert card_counts_block(gold.GOLD_DIR / "CARD.md") == render_counts(counts)
    types = Counter(r.meta["constraint_type"] for s in records.values() for r in s)
    assert set(types) <= set(gold.CONSTRAINT_TYPES)


def test_built_files_are_up_to_date_with_the_sources(tmp_path: Path) -> None:
    """Fails when a source file changed without `dualview data gold-build`."""
    shutil.copy(gold.GOLD_DIR / "CARD.md", tmp_path / "CARD.md")
    gold.build(gold.SOURCE_DIR, tmp_path)
    for name in ("train.jsonl", "test.jsonl", "counts.json", "CARD.md"):
        built = (tmp_path / name).read_text(encoding="utf-8")
        shipped = (gold.GOLD_DIR / name).read_text(encoding="utf-8")
        assert built == shipped, f"{name} is stale: run `dualview data gold-build`"


def test_size_and_coverage(records) -> None:
    """The acceptance sizes: >= 200 instances, >= 8 domains, >= 50 test instances."""
    counts = compute_counts(records)
    assert counts["instances"] >= 200
    assert len(counts["domains"]) >= 8
    assert counts["splits"]["test"]["instances"] >= 50
    assert set(counts["constraint_types"]) == set(gold.CONSTRAINT_TYPES)
