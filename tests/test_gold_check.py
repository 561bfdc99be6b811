"""The gold-set check flags planted near-duplicates, leaks and equal reversals, and only those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dualview.data import gold
from dualview.data.gold import GoldInstance
from dualview.data.gold_check import CheckConfig, check_instances, shingle_jaccard, stem
from dualview.data.gold_lexical import lexical_pairwise
from dualview.data.gold_semantic import suspect_extras
from tests.gold_fixtures import instance, words, write_source
from tests.helpers import run_cli


def _findings(tmp_path: Path, planted: dict[str, Any], config: CheckConfig | None = None):
    items = [instance(number=i) for i in (1, 2, 3)]
    items[1] = planted
    path = write_source(tmp_path, items)
    return check_instances(gold.load_instances([path]), config)


def _append(passage: dict[str, Any], extra: str) -> None:
    passage["text"] = f"{passage['text']} {extra}"


def test_clean_set_has_no_findings(tmp_path: Path) -> None:
    assert _findings(tmp_path, instance(number=2)) == []


def test_near_duplicate_n_star_is_flagged(tmp_path: Path) -> None:
    planted = instance(number=2)
    text = planted["positive"]["text"].split()
    text[10] = "different"
    planted["instruction_negatives"][0]["text"] = " ".join(text)
    findings = _findings(tmp_path, planted)
    assert [(f.instance, f.kind) for f in findings] == [("alpha-002", "near_duplicate")]
    assert "P+ vs N*" in findings[0].detail and findings[0].line == 2


def test_leaked_instruction_word_is_flagged(tmp_path: Path) -> None:
    planted = instance(number=2)
    planted["instruction"] = "I want paediatric advice; material for adults is not relevant."
    _append(planted["positive"], "paediatric wards")
    findings = _findings(tmp_path, planted)
    assert [(f.kind, f.detail) for f in findings] == [
        ("leak", "instruction words only in P+: ['paediatric']")
    ]


def test_word_in_a_negative_too_is_not_a_leak(tmp_path: Path) -> None:
    planted = instance(number=2)
    planted["instruction"] = "I want paediatric advice; material for adults is not relevant."
    _append(planted["positive"], "paediatric wards")
    _append(planted["instruction_negatives"][1], "unlike paediatric care")
    assert _findings(tmp_path, planted) == []


def test_reversed_instruction_leak_into_n_star_is_flagged(tmp_path: Path) -> None:
    planted = instance(number=2)
    planted["reversed_instruction"] = "I want geriatric advice; material for children is out."
    _append(planted["instruction_negatives"][0], "geriatric care")
    findings = _findings(tmp_path, planted)
    assert [f.detail for f in findings] == ["reversed-instruction words only in N*: ['geriatric']"]


def _keyword_instance(reversed_instruction: str) -> dict[str, Any]:
    planted = instance(number=2)
    planted["constraint_type"] = "keyword_inclusion"
    planted["instruction"] = "The page must mention dimeticone."
    planted["reversed_instruction"] = reversed_instruction
    _append(planted["positive"], "dimeticone lotion")
    return planted


def test_keyword_leak_allowed_when_reversed_side_mirrors_it(tmp_path: Path) -> None:
    mirror = _keyword_instance("The page must mention malathion.")
    _append(mirror["instruction_negatives"][0], "malathion lotion")
    assert _findings(tmp_path, mirror) == []
    negated = _keyword_instance("The page must not mention dimeticone at all.")
    assert _findings(tmp_path / "b", negated) == []


def test_keyword_leak_flagged_when_reversed_side_has_no_cue(tmp_path: Path) -> None:
    planted = _keyword_instance("Any other lotion is fine for me.")
    findings = _findings(tmp_path, planted)
    assert [f.kind for f in findings] == ["leak"] and "dimeticon" in findings[0].detail


def test_keyword_also_in_a_negative_is_flagged(tmp_path: Path) -> None:
    planted = _keyword_instance("The page must not mention dimeticone at all.")
    _append(planted["instruction_negatives"][1], "no dimeticone here")
    findings = _findings(tmp_path, planted)
    assert [f.kind for f in findings] == ["leak"] and "no instruction keyword" in findings[0].detail


def test_nearly_equal_reversal_is_flagged(tmp_path: Path) -> None:
    planted = instance(number=2)
    planted["reversed_instruction"] = planted["instruction"].replace("children", "childrens")
    findings = _findings(tmp_path, planted)
    assert [f.kind for f in findings] == ["equal_reversal"]
    relaxed = CheckConfig(max_reversal_ratio=1.0)
    assert _findings(tmp_path / "b", planted, relaxed) == []


def test_repeated_query_is_flagged(tmp_path: Path) -> None:
    planted = instance(number=2)
    planted["query"] = instance(number=1)["query"].upper() + "?"
    findings = _findings(tmp_path, planted)
    assert [(f.instance, f.kind) for f in findings] == [("alpha-002", "same_query")]
    assert "alpha-001" in findings[0].detail


def test_helpers() -> None:
    assert stem("adults") == stem("adult") and stem("tested") == "test"
    assert stem("change") == stem("changes") == stem("changing")
    assert shingle_jaccard(words("a"), words("a")) == 1.0
    assert shingle_jaccard(words("a"), words("b")) < 0.05


def test_cli_exit_codes(tmp_path: Path) -> None:
    write_source(tmp_path / "clean", [instance(number=i) for i in (1, 2)])
    ok = run_cli("data", "gold-check", "--source", str(tmp_path / "clean"))
    assert ok.returncode == 0, ok.stderr
    planted = instance(number=2)
    planted["reversed_instruction"] = planted["instruction"].replace("children", "childrens")
    write_source(tmp_path / "bad", [instance(number=1), planted])
    bad = run_cli("data", "gold-check", "--source", str(tmp_path / "bad"))
    assert bad.returncode == 1
    assert "alpha.jsonl:2: alpha-002: equal_reversal" in bad.stdout


def test_lexical_baseline_counts_pairs_won_by_word_matching() -> None:
    keyed = _keyword_instance("The page must mention malathion.")
    _append(keyed["instruction_negatives"][0], "malathion lotion")
    plain = instance(number=3)
    results = lexical_pairwise([GoldInstance.model_validate(i) for i in (keyed, plain)])
    assert results["type:keyword_inclusion"].rates() == {"orig": 1.0, "dv": 1.0, "both": 1.0}
    # No shared words with either passage: every score ties at 0, and a tie is a miss.
    assert results["type:audience"].rates() == {"orig": 0.0, "dv": 0.0, "both": 0.0}
    assert results["all"].n == 2 and results["all"].both == 1


class _AnimalEncoder:
    """Stub encoder: one axis per animal word, plus a small constant axis."""

    def encode(self, texts):
        return np.array([[t.count("lion"), t.count("zebra"), 0.1] for t in texts], dtype=float)


def test_semantic_check_flags_an_extra_that_answers_the_query(tmp_path: Path) -> None:
    lion, zebra = instance(number=1), instance(number=2)
    lion["query"] += " lion"
    for passage in (lion["positive"], lion["instruction_negatives"][0]):
        _append(passage, "lion")
    zebra["query"] += " zebra"
    for passage in (zebra["positive"], zebra["instruction_negatives"][0]):
        _append(passage, "zebra")
    _append(zebra["hard_negatives"][0], "lion lion")
    located = gold.load_instances([write_source(tmp_path, [lion, zebra])])
    findings = suspect_extras(located, _AnimalEncoder(), n_hard=6)
    assert [(f.instance, f.kind) for f in findings] == [("alpha-001", "possible_false_negative")]
    assert zebra["hard_negatives"][0]["title"] in findings[0].detail
