"""The gold builder: validation errors name file, line and field; records, extras and split."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dualview.data import gold
from dualview.data.gold_card import CARD_END, CARD_START, card_counts_block
from dualview.errors import ConfigError, DataError
from tests.gold_fixtures import instance, passage, write_source
from tests.helpers import run_cli


def _broken(mutate) -> list[dict[str, Any]]:
    """Three valid instances; the second is broken by ``mutate``."""
    items = [instance(number=i) for i in (1, 2, 3)]
    mutate(items[1])
    return items


def _drop_query(i):
    del i["query"]


def _no_n_star(i):
    i["instruction_negatives"][0]["n_star"] = False


def _two_n_stars(i):
    i["instruction_negatives"][1]["n_star"] = True


def _no_negatives(i):
    i["instruction_negatives"] = []


def _four_negatives(i):
    i["instruction_negatives"] += [passage("x1"), passage("x2")]


def _one_hard(i):
    i["hard_negatives"] = i["hard_negatives"][:1]


def _three_hard(i):
    i["hard_negatives"].append(passage("x3"))


def _short_passage(i):
    i["positive"] = passage("short", n=39)


def _long_passage(i):
    i["hard_negatives"][1] = passage("long", n=151)


def _bad_type(i):
    i["constraint_type"] = "colour"


def _same_reversal(i):
    i["reversed_instruction"] = i["instruction"].upper()


def _unknown_field(i):
    i["notes"] = "x"


BROKEN = {
    "missing field": (_drop_query, "query"),
    "no n_star": (_no_n_star, "instruction_negatives"),
    "two n_star": (_two_n_stars, "instruction_negatives"),
    "0 instruction negatives": (_no_negatives, "instruction_negatives"),
    "4 instruction negatives": (_four_negatives, "instruction_negatives"),
    "1 hard negative": (_one_hard, "hard_negatives"),
    "3 hard negatives": (_three_hard, "hard_negatives"),
    "39-word passage": (_short_passage, "positive.text"),
    "151-word passage": (_long_passage, "hard_negatives.1.text"),
    "unknown constraint type": (_bad_type, "constraint_type"),
    "reversed == original": (_same_reversal, "reversed_instruction"),
    "unknown field": (_unknown_field, "notes"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_validator_rejects_each_broken_kind(tmp_path: Path, case: str) -> None:
    mutate, field = BROKEN[case]
    path = write_source(tmp_path, _broken(mutate))
    with pytest.raises(DataError) as info:
        gold.load_instances([path])
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, field)


def test_duplicate_instance_id_across_files(tmp_path: Path) -> None:
    write_source(tmp_path, [instance(number=1)], name="alpha")
    dup = instance(number=1)
    dup["positive"] = passage("other")
    second = write_source(tmp_path, [instance(number=2), dup], name="beta")
    with pytest.raises(DataError, match="duplicate instance id 'alpha-001'") as info:
        gold.load_instances(gold.source_files(tmp_path))
    assert (info.value.path, info.value.line) == (str(second), 2)


def test_id_must_match_domain(tmp_path: Path) -> None:
    bad = instance(number=2)
    bad["domain"] = "beta"
    path = write_source(tmp_path, [instance(number=1), bad])
    with pytest.raises(DataError, match="does not start with 'beta-'"):
        gold.load_instances([path])


def test_cli_reports_one_line_and_exit_2(tmp_path: Path) -> None:
    write_source(tmp_path / "src", _broken(_no_n_star))
    result = run_cli(
        "data", "gold-build", "--source", str(tmp_path / "src"), "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert "alpha.jsonl:2: instruction_negatives: exactly one" in result.stderr
    assert "Traceback" not in result.stderr


def test_orig_and_dv_records() -> None:
    inst = gold.GoldInstance.model_validate(instance(n_negatives=3))
    orig, dv = gold.build_records(inst, [p.document() for p in inst.hard_negatives], "train")
    n_star, *others = [p.document() for p in inst.instruction_negatives]
    assert orig.view == "orig" and dv.view == "dv" and dv.parent_id == orig.id
    assert orig.positives == [inst.positive.document()]
    assert orig.instruction_negatives == [n_star, *others]
    assert dv.instruction == inst.reversed_instruction and dv.query == orig.query
    assert dv.positives == [n_star]
    assert dv.instruction_negatives == [inst.positive.document(), *others]
    assert dv.hard_negatives == orig.hard_negatives
    assert dv.meta["n_star"] == n_star.id and dv.meta["constraint_type"] == "audience"


def _instances(domains: dict[str, int]) -> list[gold.GoldInstance]:
    """``n`` instances per domain, constraint types assigned in turn."""
    out = []
    for d, n in domains.items():
        for i in range(1, n + 1):
            raw = instance(domain=d, number=i)
            raw["constraint_type"] = gold.CONSTRAINT_TYPES[i % len(gold.CONSTRAINT_TYPES)]
            out.append(gold.GoldInstance.model_validate(raw))
    return out


def test_extra_hard_negatives_come_from_other_instances_of_the_domain() -> None:
    instances = _instances({"alpha": 5, "beta": 5})
    records = list(gold.iter_gold_records(instances, n_hard=6))
    by_domain: dict[str, set[str]] = {}
    for inst in instances:
        docs = {p.document().id for p in (inst.positive, *inst.hard_negatives)}
        by_domain.setdefault(inst.domain, set()).update(docs)
    own = {i.instance: {p.document().id for p in i.passages()} for i in instances}
    for record in records:
        ids = [d.id for d in record.hard_negatives]
        assert len(ids) == 6 == len(set(ids))
        extras = set(ids[2:])
        assert extras <= by_domain[record.meta["domain"]]
        assert not extras & own[record.meta["instance"]]
    again = list(gold.iter_gold_records(instances, n_hard=6))
    assert [r.model_dump() for r in again] == [r.model_dump() for r in records]


def test_small_domain_borrows_from_other_domains() -> None:
    records = list(gold.iter_gold_records(_instances({"alpha": 1, "beta": 4}), n_hard=5))
    assert all(len(r.hard_negatives) == 5 for r in records)


def test_split_is_stratified_deterministic_and_keeps_views_together() -> None:
    instances = _instances({"alpha": 8, "beta": 13})
    split = gold.assign_splits(instances)
    for domain, n in (("alpha", 8), ("beta", 13)):
        test_ids = [k for k, v in split.items() if k.startswith(domain) and v == "test"]
        assert len(test_ids) == -(-n // 4)
    assert gold.assign_splits(list(reversed(instances))) == split
    test_types = Counter(i.constraint_type for i in instances if split[i.instance] == "test")
    assert sum(test_types.values()) == 2 + 4 and max(test_types.values()) == 1
    records = list(gold.iter_gold_records(instances))
    per_instance = {}
    for record in records:
        per_instance.setdefault(record.meta["instance"], set()).add(record.meta["split"])
    assert all(len(s) == 1 for s in per_instance.values())


def test_build_writes_splits_counts_and_card(tmp_path: Path) -> None:
    source = tmp_path / "src"
    write_source(source, [instance("alpha", i) for i in range(1, 6)], name="alpha")
    write_source(source, [instance("beta", i) for i in range(1, 4)], name="beta")
    out = tmp_path / "out"
    out.mkdir()
    (out / "CARD.md").write_text(f"# card\n\n{CARD_START}\nold\n{CARD_END}\n\nend\n")
    result = run_cli("data", "gold-build", "--source", str(source), "--out", str(out))
    assert result.returncode == 0, result.stderr
    train, test = gold.load_gold("train", out), gold.load_gold("test", out)
    assert len(train) + len(test) == 16
    train_ids = {r.meta["instance"] for r in train}
    test_ids = {r.meta["instance"] for r in test}
    assert not train_ids & test_ids and len(train_ids | test_ids) == 8
    counts = json.loads((out / "counts.json").read_text())
    assert counts["instances"] == 8 and counts["splits"]["test"]["instances"] == 2 + 1
    assert counts["domains"]["alpha"] == {"test": 2, "train": 3}
    block = card_counts_block(out / "CARD.md")
    assert "| alpha | 3 | 2 | 5 |" in block and "old" not in block
    assert (out / "CARD.md").read_text().endswith("\nend\n")


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="n_hard"):
        list(gold.iter_gold_records(_instances({"alpha": 2}), n_hard=1))
    with pytest.raises(ConfigError, match="test_fraction"):
        list(gold.iter_gold_records(_instances({"alpha": 2}), test_fraction=1.0))
