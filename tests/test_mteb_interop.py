"""mteb interoperability: a dualview-trained model scores the same through mteb itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.demo import EVAL_DIR
from dualview.eval import mteb_compat
from dualview.eval.benchmarks import BENCHMARKS
from dualview.eval.mteb_compat import followir_task, write_mteb_results
from dualview.eval.run import evaluate
from dualview.eval.two_stage import RerankSettings
from tests.conftest import FIXTURES
from tests.test_eval_rerank import FIX as EVAL_FIX
from tests.test_eval_rerank import write_pairs
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


# --- every benchmark with an mteb task gets its file; the others are said, with why ------


def _payload(name: str, spec: str, metrics: dict[str, float]) -> dict:
    label = spec.partition("=")[0].replace(":", "-").replace("/", "_")
    return {
        "benchmark": {"name": name, "spec": spec, "label": label},
        "model": {"name": "runs/x/model", "dim": 32},
        "metrics": metrics,
        "seconds": 2.0,
    }


def test_every_mapped_task_is_a_real_mteb_task_with_our_split_and_main_score() -> None:
    mteb = pytest.importorskip("mteb")
    mapped = {  # every task a benchmark's metadata maps, with the main score it declares
        task: cls.meta.mteb.main_score_key
        for _, cls in BENCHMARKS.items()
        for task in cls.meta.mteb.tasks.values()
    }
    assert {"SciFact", "Robust04InstructionRetrieval", "InstructIR"} <= set(mapped)
    for name, main_score in mapped.items():
        meta = mteb.get_task(name).metadata
        assert "test" in meta.eval_splits, name  # the split dualview's loaders read
        assert meta.main_score == main_score, name


def test_beir_from_the_hub_and_instructir_load_in_mteb(tmp_path: Path) -> None:
    mteb = pytest.importorskip("mteb")
    beir = _payload(
        "beir", "beir:BeIR/scifact", {"nDCG@10": 0.61, "Recall@100": 0.9, "MRR@10": 0.55}
    )
    [path] = write_mteb_results(beir, tmp_path)
    loaded = mteb.TaskResult.from_disk(path)
    assert (path.name, loaded.task_name) == ("SciFact.json", "SciFact")
    assert loaded.get_score() == pytest.approx(0.61)
    scores = json.loads(path.read_text())["scores"]["test"][0]
    assert (scores["recall_at_100"], scores["mrr_at_10"]) == (0.9, 0.55)

    instructir = _payload("instructir", "instructir", {"nDCG@10": 0.7, "Robustness@10": 0.4})
    [path] = write_mteb_results(instructir, tmp_path)
    loaded = mteb.TaskResult.from_disk(path)
    assert loaded.get_score() == pytest.approx(0.4)  # mteb's main score: robustness_at_10
    assert json.loads(path.read_text())["scores"]["test"][0]["ndcg_at_10"] == 0.7


@pytest.mark.parametrize(
    ("name", "spec", "metrics", "why"),
    [
        ("paired", "paired=data/pairs", {"p-MRR": 5.0}, "dualview's own benchmark"),
        ("phenomena", "phenomena", {"p-MRR": 5.0}, "dualview's own benchmark"),
        ("infosearch", "infosearch=x", {"Length/p-MRR": 1.0}, "no InfoSearch task"),
        ("mair", "mair:IFEval=x", {"IFEval/nDCG@10": 0.3}, "no MAIR task"),
        ("beir", "beir=../shared/data/scifact", {"nDCG@10": 0.6}, "a local folder"),
        ("beir", "beir:BeIR/msmarco", {"nDCG@10": 0.6}, "dev split"),
        ("beir", "beir:BeIR/cqadupstack", {"nDCG@10": 0.6}, "no mteb task on this dataset"),
    ],
)
def test_a_benchmark_without_an_mteb_task_is_said_and_recorded(
    tmp_path: Path, capsys, name: str, spec: str, metrics: dict, why: str
) -> None:
    payload = _payload(name, spec, metrics)
    assert write_mteb_results(payload, tmp_path) == []
    assert not (tmp_path / "mteb").exists()
    [line] = capsys.readouterr().err.splitlines()
    label = payload["benchmark"]["label"]
    assert line.startswith(f"mteb: no result file for {label} (runs/x/model): ")
    assert why in line
    [skipped] = mteb_compat.mteb_mapping(payload).summary()["skipped"]
    assert why in skipped["why"]


def test_a_followir_set_mteb_lacks_is_skipped_beside_the_ones_it_has(tmp_path, capsys) -> None:
    metrics = {"Robust04/p-MRR": 7.5, "gold/p-MRR": 3.0, "p-MRR": 5.25}
    [path] = write_mteb_results(_payload("followir", "followir=x", metrics), tmp_path)
    assert path.name == "Robust04InstructionRetrieval.json"
    assert "followir set gold: not one of mteb's FollowIR sets" in capsys.readouterr().err


def test_evaluate_records_the_mteb_tasks_and_the_skips_in_each_result(tmp_path, capsys) -> None:
    pairs = write_pairs(tmp_path / "pairs")
    specs = [f"paired={pairs}", f"followir={EVAL_FIX / 'followir'}"]
    evaluate([], specs, tmp_path / "out", rerank=RerankSettings([], "bm25"))
    paired = json.loads((tmp_path / "out" / "bm25" / "paired.json").read_text())
    assert paired["mteb"]["tasks"] == []
    assert "dualview's own benchmark" in paired["mteb"]["skipped"][0]["why"]
    followir = json.loads((tmp_path / "out" / "bm25" / "followir.json").read_text())
    assert "Robust04InstructionRetrieval" in followir["mteb"]["tasks"]
    assert "mteb: no result file for paired (bm25): " in capsys.readouterr().err
