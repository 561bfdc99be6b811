"""Two-stage evaluation reports its first stage alone beside the reranked numbers: in the
same result JSON (``first_stage``) and in the summary table (``<metric> (first stage)``).

The pairs and rerankers are those of `tests.test_eval_rerank`, whose numbers are worked out
by hand: BM25 on query + instruction gets every pair (p-MRR +50, accuracy 100); a reranker
that reverses BM25's top 2 turns each pair around (p-MRR -50, accuracy 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.errors import DataError
from dualview.eval import run as run_module
from dualview.eval.run import evaluate
from dualview.eval.two_stage import RerankSettings
from dualview.report.collect import eval_file_row, eval_folder_rows
from tests.test_eval_rerank import FIX, Overlap, write_pairs


def _result(out: Path, column: str, label: str) -> dict:
    return json.loads((out / column / f"{label}.json").read_text())


def test_a_reranked_result_holds_its_first_stage_alone(tmp_path: Path, monkeypatch) -> None:
    measured: list[str] = []
    measure = run_module._measure
    monkeypatch.setattr(
        run_module, "_measure", lambda r, *a: measured.append(r.name) or measure(r, *a)
    )
    pairs = write_pairs(tmp_path / "pairs")
    out = tmp_path / "out"
    reverse, same = Overlap(sign=-1.0, name="reverse"), Overlap(sign=1.0, name="same")
    settings = RerankSettings(rerankers=[reverse, same], first_stage="bm25", top_k=2)
    summary = evaluate([], [f"paired={pairs}"], out, rerank=settings)

    payload = _result(out, "reverse@bm25", "paired")
    assert payload["metrics"]["p-MRR"] == pytest.approx(-50.0)
    first = payload["first_stage"]
    assert (first["name"], first["kind"]) == ("bm25", "bm25")
    assert first["metrics"]["p-MRR"] == pytest.approx(50.0)
    assert first["metrics"]["pairwise accuracy"] == pytest.approx(100.0)
    assert first["per_query"]["p-MRR"] == pytest.approx(
        {"p1/a>b": 50.0, "p1/b>a": 50.0, "p2/a>b": 50.0, "p2/b>a": 50.0}
    )
    # Both rerankers over BM25 carry the same first stage, computed once.
    assert _result(out, "same@bm25", "paired")["first_stage"] == first
    assert sorted(measured) == ["bm25", "reverse@bm25", "same@bm25"]

    table = summary.table().splitlines()
    assert table[0] == "| benchmark | metric | reverse@bm25 | same@bm25 |"
    assert "| paired | p-MRR | -50.00 | 50.00 |" in table
    assert "| paired | p-MRR (first stage) | 50.00 | 50.00 |" in table
    saved = json.loads((out / "summary.json").read_text())
    assert saved["first_stage"]["reverse@bm25"]["paired"]["p-MRR"] == pytest.approx(50.0)

    # The report reads these results as before: the reranked column's numbers.
    row = eval_file_row("reverse", out / "reverse@bm25" / "paired.json")
    assert row.metrics["paired p-MRR"] == pytest.approx(-50.0)
    # On the eval folder it shows the first stage alone as a row of its own, once.
    rows = eval_folder_rows(out)
    assert [r.name for r in rows] == ["bm25", "reverse@bm25", "same@bm25"]
    assert rows[0].metrics["paired p-MRR"] == pytest.approx(50.0)
    assert rows[0].query_values and rows[0].query_values != rows[1].query_values  # per query


def test_an_older_reranked_result_without_first_stage_is_recomputed(tmp_path: Path) -> None:
    pairs = write_pairs(tmp_path / "pairs")
    out = tmp_path / "out"
    reranker = Overlap(sign=-1.0, name="reverse")
    settings = RerankSettings(rerankers=[reranker], first_stage="bm25", top_k=2)
    evaluate([], [f"paired={pairs}"], out, rerank=settings)
    path = out / "reverse@bm25" / "paired.json"
    old = json.loads(path.read_text())
    del old["first_stage"]  # as written before the first stage was reported
    path.write_text(json.dumps(old))
    again = evaluate([], [f"paired={pairs}"], out, rerank=settings)
    assert json.loads(path.read_text())["first_stage"]["metrics"]["p-MRR"] == pytest.approx(50.0)
    assert again.first_stage["reverse@bm25"]["paired"]["p-MRR"] == pytest.approx(50.0)


def test_first_stages_alone_have_no_first_stage_entry(tmp_path: Path) -> None:
    """BM25 alone and a reranker over the benchmark's own candidates (no first stage that
    ranks) have no ``first_stage`` entry and no extra rows."""
    out = tmp_path / "out"
    spec = f"followir={FIX / 'followir'}"
    summary = evaluate([], [spec], out, rerank=RerankSettings([], "bm25"))
    assert "first_stage" not in _result(out, "bm25", "followir")
    reranked = RerankSettings([Overlap(name="o")], "candidates")
    summary = evaluate([], [spec], out, rerank=reranked)
    assert "first_stage" not in _result(out, "o@candidates", "followir")
    assert not any("(first stage)" in metric for _, metric, _ in summary.rows())


def test_a_damaged_first_stage_entry_is_one_located_error(tmp_path: Path) -> None:
    pairs = write_pairs(tmp_path / "pairs")
    out = tmp_path / "out"
    settings = RerankSettings([Overlap(sign=-1.0, name="reverse")], "bm25", top_k=2)
    evaluate([], [f"paired={pairs}"], out, rerank=settings)
    path = out / "reverse@bm25" / "paired.json"
    payload = json.loads(path.read_text())
    payload["first_stage"]["metrics"] = None
    path.write_text(json.dumps(payload))
    with pytest.raises(DataError, match=r"paired\.json: json: first_stage: not a dualview"):
        eval_folder_rows(out)
