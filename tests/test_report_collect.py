from __future__ import annotations

import json

from dualview.report.collect import collect_rows, paper_columns, pmrr_per_query


def _write(folder, name, kind, label, metrics, per_query):
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": {"name": kind, "label": label},
        "metrics": metrics,
        "per_query": per_query,
    }
    (folder / f"{name}.json").write_text(json.dumps(payload))


def test_paper_columns_scale_ir_measures_only():
    cols = paper_columns("followir", "followir", {"p-MRR": 5.0, "Score": 0.2, "x": 1})
    assert cols == {"FollowIR p-MRR": 5.0, "FollowIR Score": 20.0}
    cols = paper_columns("infosearch", "infosearch", {"length/p-MRR": 3.0, "length/x": 1.0})
    assert cols == {"InfoSearch length p-MRR": 3.0}
    cols = paper_columns("mair", "mair", {"IFEval/nDCG@10": 0.3, "nDCG@10": 0.3})
    assert cols == {"MAIR IFEval nDCG@10": 30.0}
    cols = paper_columns("beir", "beir", {"nDCG@10": 0.5, "Recall@100": 0.9, "MRR@10": 0.4})
    assert cols == {"beir nDCG@10": 50.0, "beir Recall@100": 90.0}


def test_pmrr_per_query_prefers_overall_values():
    paired = {"per_query": {"p-MRR": {"a": 10.0, "b": -5.0}, "audience/p-MRR": {"a": 10.0}}}
    assert pmrr_per_query("paired", paired) == {"paired": [10.0, -5.0]}
    followir = {"per_query": {"Robust04/p-MRR": {"q1": 1.0}, "Robust04/Score": {"q1": 0.1}}}
    assert pmrr_per_query("followir", followir) == {"followir Robust04": [1.0]}


def test_collect_rows_reads_eval_folders_and_loss(tmp_path):
    _write(
        tmp_path / "eval" / "runs_a_model",
        "followir",
        "followir",
        "followir",
        {"p-MRR": 2.5, "Score": 0.25},
        {"Demo/p-MRR": {"q1": 2.5}},
    )
    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1, "loss": 2.0}\n{"event": "checkpoint"}\n{"step": 2, "loss": 1.5}\n')
    (row,) = collect_rows(tmp_path / "eval", {"Ins-DV": "runs/a/model"}, {"Ins-DV": log})
    assert row.name == "Ins-DV"
    assert row.metrics == {"FollowIR p-MRR": 2.5, "FollowIR Score": 25.0}
    assert row.per_query == {"followir Demo": [2.5]}
    assert row.loss_curve == [(1, 2.0), (2, 1.5)]
