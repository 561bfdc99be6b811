"""mteb interoperability: a dualview-trained model scores the same through mteb itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.demo import EVAL_DIR
from dualview.eval.mteb_compat import followir_task, write_mteb_results
from dualview.eval.run import evaluate
from tests.conftest import FIXTURES
from tests.train_tiny import train_tiny_model

FOLLOWIR = EVAL_DIR / "followir"  # the bundled gold test split in FollowIR's layout


@pytest.mark.slow
def test_mteb_p_mrr_equals_ours_and_result_files_load_in_mteb(tmp_path: Path) -> None:
    mteb = pytest.importorskip("mteb")
    from sentence_transformers import SentenceTransformer

    # Equal query and document lengths: mteb encodes both with the model's max_seq_length.
    model = train_tiny_model(tmp_path, FIXTURES / "train" / "dv_small.jsonl", query_max_length=48)
    summary = evaluate([str(model)], [f"followir={FOLLOWIR}"], tmp_path / "eval", cache=False)
    ours = summary.values[str(model)]["followir"]

    task = followir_task(FOLLOWIR)
    st = SentenceTransformer(str(model), device="cpu")
    result = mteb.evaluate(st, task, cache=None, show_progress_bar=False).task_results[0]
    scores = result.scores["test"][0]
    assert abs(scores["p-MRR"] - ours["p-MRR"] / 100) <= 1e-6
    # mteb rounds its IR measures to 5 decimals; p-MRR it keeps exact.
    assert abs(scores["og"]["map_at_1000"] - ours["Score"]) <= 5e-6


def test_followir_result_is_written_in_mteb_format(tmp_path: Path) -> None:
    mteb = pytest.importorskip("mteb")
    payload = {
        "benchmark": {"name": "followir"},
        "model": {"name": "runs/x/model", "dim": 32},
        "metrics": {"Robust04/p-MRR": 7.5, "Robust04/MAP@1000": 0.25, "p-MRR": 7.5},
        "seconds": 1.5,
    }
    [path] = write_mteb_results(payload, tmp_path)
    assert path.name == "Robust04InstructionRetrieval.json"
    loaded = mteb.TaskResult.from_disk(path)
    assert loaded.task_name == "Robust04InstructionRetrieval"
    assert abs(loaded.get_score() - 0.075) < 1e-12
    assert json.loads(path.read_text())["scores"]["test"][0]["og"] == {"map_at_1000": 0.25}
