"""Tables in docs/results.md regenerate from the committed report files they name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dualview.docgen.results_doc import main, render, stale_tables, table_blocks, write_tables
from dualview.errors import DataError
from dualview.report.compare import significance_table
from dualview.report.significance import PairedComparison
from dualview.report.table import ConfigResult, markdown_table, to_csv
from dualview.review.stats import markdown as review_markdown
from dualview.review.stats import summarize
from dualview.synth.bench import markdown_table as bench_markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"


def _rows() -> list[ConfigResult]:
    a = ConfigResult("Ins-orig", {"gold p-MRR": 15.774, "gold nDCG@10": 80.1}, runs=3)
    a.spread = {"gold p-MRR": 1.234, "gold nDCG@10": 0.5}
    b = ConfigResult("Ins-DV-gold", {"gold p-MRR": 21.016, "gold nDCG@10": 79.96}, runs=3)
    b.spread = {"gold p-MRR": 2.0, "gold nDCG@10": 0.25}
    return [a, b]


def _comparisons() -> list[PairedComparison]:
    arms = ("Ins-DV-gold", "Ins-orig", 42)
    return [
        PairedComparison("gold p-MRR", *arms, 21.0, 15.8, 5.2, 1.1, 9.3, 0.004, 0.008),
        PairedComparison("gold nDCG@10", *arms, 79.9, 80.1, -0.2, -1.0, 0.6, 0.61, 0.61),
    ]


def _document(tmp_path: Path) -> Path:
    folder = tmp_path / "results" / "exp"
    folder.mkdir(parents=True)
    (folder / "report.csv").write_text(to_csv(_rows()), encoding="utf-8")
    payload = [c.to_dict() for c in _comparisons()]
    (folder / "significance.json").write_text(json.dumps(payload), encoding="utf-8")
    doc = tmp_path / "results.md"
    doc.write_text(
        "# Results\n\n<!-- table: results/exp/report.csv -->\nold\n<!-- end table -->\n\n"
        "text\n\n<!-- table: results/exp/significance.json -->\n<!-- end table -->\n",
        encoding="utf-8",
    )
    return doc


def test_a_report_csv_renders_the_table_the_report_printed(tmp_path: Path) -> None:
    doc = _document(tmp_path)
    expected = markdown_table(_rows())
    assert "**21.02 ± 2.00**" in expected and "15.77 ± 1.23" in expected
    assert render(doc.parent / "results" / "exp" / "report.csv") == expected


def test_significance_json_renders_the_significance_table(tmp_path: Path) -> None:
    doc = _document(tmp_path)
    rendered = render(doc.parent / "results" / "exp" / "significance.json")
    assert rendered == significance_table(_comparisons())
    assert "+5.20 *" in rendered and "-0.20 |" in rendered


def test_stale_tables_are_found_and_rewritten(tmp_path: Path) -> None:
    doc = _document(tmp_path)
    assert [b.line for b in stale_tables(doc)] == [3, 9]
    assert main([str(doc)]) == 1
    assert write_tables(doc) == 2
    assert stale_tables(doc) == [] and main([str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert "| Ins-DV-gold | **21.02 ± 2.00** |" in text and "text\n" in text
    # one changed digit in the prose is caught
    doc.write_text(text.replace("21.02 ± 2.00", "21.03 ± 2.00"), encoding="utf-8")
    assert [b.source.name for b in stale_tables(doc)] == ["report.csv"]


def test_a_missing_or_foreign_source_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        render(tmp_path / "gone.csv")
    bad = tmp_path / "x.csv"
    bad.write_text("name,a\nx,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"x\.csv.*configuration"):
        render(bad)


def test_every_generated_table_in_docs_results_matches_its_committed_file() -> None:
    blocks = table_blocks(RESULTS)
    committed = (ROOT / "docs", ROOT / "benchmarks" / "results")
    for block in blocks:
        assert any(block.source.resolve().is_relative_to(c) for c in committed), block.source
    stale = stale_tables(RESULTS)
    assert not stale, [f"{RESULTS}:{b.line} differs from {b.source}" for b in stale]


def test_a_block_can_keep_only_some_metrics(tmp_path: Path) -> None:
    doc = _document(tmp_path)
    text = doc.read_text(encoding="utf-8")
    text = text.replace("exp/report.csv -->", "exp/report.csv; gold nDCG -->")
    text = text.replace("exp/significance.json -->", "exp/significance.json; gold p-MRR -->")
    doc.write_text(text, encoding="utf-8")
    assert [b.only for b in table_blocks(doc)] == [("gold nDCG",), ("gold p-MRR",)]
    assert write_tables(doc) == 2 and stale_tables(doc) == []
    text = doc.read_text(encoding="utf-8")
    assert "| configuration | gold nDCG@10 |\n" in text and "21.02" not in text
    assert "<!-- table: results/exp/report.csv; gold nDCG -->" in text  # marker kept
    assert "+5.20 *" in text and "-0.20 |" not in text


def test_bench_synth_and_review_files_render_with_their_tools_tables(tmp_path: Path) -> None:
    bench = json.loads((ROOT / "benchmarks" / "results" / "bench_synth_local.json").read_text())
    (tmp_path / "bench.json").write_text(json.dumps(bench), encoding="utf-8")
    assert render(tmp_path / "bench.json") == bench_markdown(bench).rstrip() + "\n"
    assert "| shots | records | parse rate |" in render(tmp_path / "bench.json")
    verdicts = [
        {"item": f"i{k}", "verdict": "valid" if k % 3 else "invalid", "reviewer": "r1",
         "stratum": "food", "judge": "valid"}
        for k in range(6)
    ]  # fmt: skip
    stats = summarize(verdicts)
    (tmp_path / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    assert render(tmp_path / "stats.json") == review_markdown(stats).rstrip() + "\n"
    with pytest.raises(DataError, match="report tables only"):
        render(tmp_path / "bench.json", ("paired",))
    (tmp_path / "other.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(DataError, match=r"other\.json.*not a result file"):
        render(tmp_path / "other.json")


def test_an_llm_jobs_stats_file_renders_its_funnel(tmp_path: Path) -> None:
    stats = {
        "task": "seed", "model": "m", "units": 10, "records_out": 3, "llm_calls": 10,
        "outcomes": {"ok": 3, "impossible": 1, "rejected": 6, "skipped": 0, "error": 0},
        "rejections": {"echoes_prompt": 4, "malformed": 2},
        "tokens_in": 1200, "tokens_out": 300, "latency_s": {"p50": 1.5, "p95": 3.25},
    }  # fmt: skip
    (tmp_path / "seed.stats.json").write_text(json.dumps(stats), encoding="utf-8")
    table = render(tmp_path / "seed.stats.json")
    assert "| rejections by reason | echoes_prompt 4, malformed 2 |" in table
    assert (
        "| records out | 3 |" in table
        and "| latency per call, p50 / p95 (s) | 1.50 / 3.25 |" in table
    )
    del stats["rejections"]  # a file written before the field
    (tmp_path / "old.stats.json").write_text(json.dumps(stats), encoding="utf-8")
    assert "not recorded" in render(tmp_path / "old.stats.json")


def test_a_folder_of_eval_results_renders_a_row_per_file(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    committed = ROOT / "docs" / "results" / "interaction-gold" / "reference"
    for name in ("base-query-only.paired.json", "cross-attention-step0.paired.json"):
        shutil.copy(committed / name, reference / name)
    table = render(reference, ("paired p-MRR", "paired pairwise"))
    assert table.splitlines()[0] == "| configuration | paired pairwise accuracy | paired p-MRR |"
    assert "| base-query-only | **47.37** | **0.00** |" in table  # instruction-blind: p-MRR 0
    assert "| cross-attention-step0 | 46.93 | -0.07 |" in table
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no evaluation"):
        render(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.paired.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(DataError, match=r"x\.paired\.json.*not a dualview eval result"):
        render(tmp_path / "bad")
