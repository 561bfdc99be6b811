"""Error analysis: flipped queries between two arms, grouped by domain and type, with texts,
and the report that carries it next to the significance table."""

from __future__ import annotations

import json
from pathlib import Path

from dualview.report import ReportOptions, write_report
from dualview.report.collect import collect_rows
from dualview.report.flips import find_flips, flips_markdown, read_query_texts, wins

LAW, FOOD = "gold-law-001-orig", "gold-food-002-orig"


def _bench(folder: Path) -> list[str]:
    folder.mkdir(parents=True)
    docs = {
        "d1": "Contract law for practising lawyers: clauses, remedies and case law.",
        "d2": "A plain guide to tenancy rights for renters | no jargon.",
        "d3": "A quick two-line recipe for soup.",
        "d4": "A long essay on the history of soup across many centuries and kitchens.",
    }
    corpus = [{"_id": k, "title": "", "text": v} for k, v in docs.items()]
    pairs = [
        {
            "pair_id": LAW,
            "query": "tenancy law",
            "constraint": "audience",
            "a": {
                "instruction": "for practising lawyers",
                "satisfying": ["d1"],
                "violating": ["d2"],
            },
            "b": {
                "instruction": "for renters, no jargon",
                "satisfying": ["d2"],
                "violating": ["d1"],
            },
        },
        {
            "pair_id": FOOD,
            "query": "soup",
            "constraint": "length",
            "a": {"instruction": "short recipe", "satisfying": ["d3"], "violating": ["d4"]},
            "b": {"instruction": "a long essay", "satisfying": ["d4"], "violating": ["d3"]},
        },
    ]
    for name, rows in (("corpus.jsonl", corpus), ("pairs.jsonl", pairs)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [str(folder / "corpus.jsonl"), str(folder / "pairs.jsonl")]


ARM_A = {f"{LAW}/a": 100.0, f"{LAW}/b": 0.0, f"{FOOD}/a": 100.0, f"{FOOD}/b": 100.0}
ARM_B = {f"{LAW}/a": 0.0, f"{LAW}/b": 100.0, f"{FOOD}/a": 100.0, f"{FOOD}/b": 0.0}


def test_wins_need_a_majority_of_runs() -> None:
    assert wins({"q": [100.0, 100.0, 0.0], "r": [100.0, 0.0, 0.0], "s": [50.0]}) == {
        "q": True,
        "r": False,
        "s": False,
    }


def test_flips_grouped_by_domain_and_type_with_texts(tmp_path: Path) -> None:
    texts = read_query_texts(_bench(tmp_path / "bench"))
    assert texts[f"{LAW}/a"].domain == "law" and texts[f"{FOOD}/b"].constraint == "length"
    assert texts[f"{LAW}/a"].lexical_margin > 0  # "practising lawyers" is in d1
    flips = find_flips(
        "paired", "A", "B", {q: [v] for q, v in ARM_A.items()}, {q: [v] for q, v in ARM_B.items()},
        texts,
    )  # fmt: skip
    assert flips.a_only == [f"{FOOD}/b", f"{LAW}/a"] and flips.b_only == [f"{LAW}/b"]
    assert (flips.both, flips.neither, flips.n_queries) == (1, 0, 4)
    md = flips_markdown(flips)
    assert "| law | 2 | 1 | 1 | +0 |" in md and "| food | 2 | 1 | 0 | +1 |" in md
    assert "| audience | 2 | 1 | 1 | +0 |" in md and "| length | 2 | 1 | 0 | +1 |" in md
    assert "Won by B only (1; first 1)" in md
    assert "renters \\| no jargon" in md  # passage text escaped inside the table
    assert "**tenancy law**<br>for practising lawyers" in md


def _eval_json(folder: Path, files: list[str], values: dict[str, float]) -> None:
    folder.mkdir(parents=True)
    payload = {
        "benchmark": {"name": "paired", "label": "paired", "files": files},
        "metrics": {"pairwise accuracy": sum(values.values()) / len(values)},
        "per_query": {"pairwise accuracy": values},
    }
    (folder / "paired.json").write_text(json.dumps(payload))


def test_report_has_significance_and_error_analysis(tmp_path: Path) -> None:
    files = _bench(tmp_path / "bench")
    _eval_json(tmp_path / "eval" / "a", files, ARM_A)
    _eval_json(tmp_path / "eval" / "b", files, ARM_B)
    rows = collect_rows(tmp_path / "eval", {"A": "a", "B": "b"})
    assert rows[0].query_values["paired pairwise accuracy"][f"{LAW}/a"] == [100.0]
    options = ReportOptions(comparisons=[("A", "B")], error_pairs=[("A", "B")], n_resamples=200)
    out = write_report(rows, tmp_path / "report", "t", options)
    md = out.markdown.read_text()
    assert "| paired pairwise accuracy | A | B | 4 | 75.00 | 50.00 | +25.00 |" in md
    assert "### Error analysis: A vs B on paired" in md
    saved = json.loads(out.significance.read_text())  # type: ignore[union-attr]
    assert saved[0]["diff"] == 25.0 and saved[0]["p_holm"] is None


def test_query_texts_from_several_sets(tmp_path: Path) -> None:
    """Runs over different sets (leave-domains-out folds) each bring their own texts."""
    first = _bench(tmp_path / "fold1")
    second = _bench(tmp_path / "fold2")
    pairs = Path(second[1])
    pairs.write_text(pairs.read_text().replace("gold-law-001", "gold-sport-009"))
    texts = read_query_texts([*first, *second])
    assert {t.domain for t in texts.values()} == {"law", "food", "sport"}


def test_the_error_analysis_stays_when_its_metric_is_not_shown(tmp_path: Path) -> None:
    files = _bench(tmp_path / "bench")
    _eval_json(tmp_path / "eval" / "a", files, ARM_A)
    _eval_json(tmp_path / "eval" / "b", files, ARM_B)
    rows = collect_rows(tmp_path / "eval", {"A": "a", "B": "b"})
    for row in rows:  # the metric shown (a prefix that matches nothing is an error)
        row.metrics["paired p-MRR"] = 1.0
    options = ReportOptions(error_pairs=[("A", "B")], n_resamples=200, metrics=["paired p-MRR"])
    md = write_report(rows, tmp_path / "report", "t", options).markdown.read_text()
    assert "### Error analysis: A vs B on paired" in md
    assert "pairwise accuracy |" not in md.split("### Error analysis")[0]  # not in the tables
