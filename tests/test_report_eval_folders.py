"""Issue 34 item 11: `dualview report` takes `dualview eval` result folders and mteb result
folders as arms ("my model vs a public model"), with the run folders' table, paired
statistics, figures and flips; a folder that is none of these is one located error."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import dualview.report as report_module
from dualview.errors import DualviewError
from dualview.eval.mteb_compat import task_result
from dualview.eval.run import evaluate
from dualview.eval.two_stage import RerankSettings
from dualview.report import ReportOptions
from dualview.report.collect import NO_PER_QUERY
from dualview.report.run_report import folder_labels, report_runs
from tests.test_eval_rerank import Overlap, write_pairs
from tests.test_hostile_cli import invoke
from tests.test_report_headline import SETS, _followir, _perturbed_tiny

# the fixture's sets under FollowIR's names, so `dualview eval` also writes mteb files
SET_NAMES = {"alpha": "robust04", "beta": "news21"}
QUERIES = sum(SETS.values())
FIGURES = ("difference_plot", "metric_plot", "pmrr_distributions", "loss_curves")
FAST = ReportOptions(n_resamples=200)


@pytest.fixture
def no_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables and tests alone (figures are the first test's and tests/test_figures.py's)."""
    for name in FIGURES:
        monkeypatch.setattr(report_module, name, lambda *args, **kwargs: None)


@pytest.fixture(scope="module")
def evals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Two `dualview eval` result folders of two tiny models on a two-set FollowIR."""
    root = tmp_path_factory.mktemp("eval-folders")
    data = _followir(root / "followir")
    for old, new in SET_NAMES.items():
        (data / old).rename(data / new)
    folders = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DUALVIEW_CACHE", str(root / "cache"))
        for seed, name in enumerate(("mine", "public"), start=1):
            model = _perturbed_tiny(root / f"{name}-model", seed)
            folders[name] = root / f"eval-{name}"
            evaluate([str(model)], [f"followir={data}"], folders[name], cache=False)
    yield folders


def _table(out: Path) -> dict[str, dict[str, str]]:
    rows = list(csv.DictReader((out / "report.csv").open()))
    return {row["configuration"]: row for row in rows if row["configuration"] != "best"}


def _model_name(folder: Path) -> str:
    return json.loads((folder / "summary.json").read_text())["models"][0]


def test_two_eval_folders_are_two_arms_with_a_paired_test(
    evals: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "report"
    argv = ["report", str(evals["public"]), str(evals["mine"]), "--out", str(out)]
    code, err = invoke([*argv, "--resamples", "200"], capsys)
    assert code == 0, err
    public, mine = _model_name(evals["public"]), _model_name(evals["mine"])
    table = _table(out)
    assert list(table) == [public, mine]  # arms named by the model names the results store
    comparisons = json.loads((out / "significance.json").read_text())
    assert {(c["metric"], c["arm"], c["control"]) for c in comparisons} == {
        ("FollowIR p-MRR", mine, public),
        ("FollowIR Score", mine, public),
    }
    for c in comparisons:  # every query of both sets, the table's own numbers
        assert c["n_queries"] == QUERIES
        assert f"{c['mean_arm']:.2f}" == table[mine][c["metric"]]
        assert f"{c['mean_control']:.2f}" == table[public][c["metric"]]
    for png in ("differences.png", "metrics.png", "pmrr_per_query.png"):
        assert (out / png).is_file()


@pytest.mark.usefixtures("no_figures")
def test_the_same_model_in_two_folders_gets_two_names(
    evals: dict[str, Path], tmp_path: Path
) -> None:
    again = tmp_path / "again"
    shutil.copytree(evals["mine"], again)
    files = report_runs([evals["mine"], again], tmp_path / "r", FAST)
    name = _model_name(evals["mine"])
    assert list(_table(files.markdown.parent)) == [f"{name} ({evals['mine']})", f"{name} ({again})"]
    # a model's own folder (OUT/<model>) is an arm too
    model_folder = next(p for p in evals["public"].iterdir() if (p / "followir.json").is_file())
    files = report_runs([model_folder, evals["mine"]], tmp_path / "r2", FAST)
    assert list(_table(files.markdown.parent)) == [_model_name(evals["public"]), name]


@pytest.mark.usefixtures("no_figures")
def test_an_mteb_folder_is_an_arm_with_the_same_columns(
    evals: dict[str, Path], tmp_path: Path
) -> None:
    """The mteb files `dualview eval` wrote for the public model, against the eval folder of
    mine: the same FollowIR p-MRR as its own eval result, and no paired test (mteb keeps no
    per-query values), said in the report."""
    mteb = evals["public"] / "mteb"
    files = report_runs([mteb, evals["mine"]], tmp_path / "r", FAST)
    table = _table(files.markdown.parent)
    alone = _table(report_runs([evals["public"]], tmp_path / "alone", FAST).markdown.parent)
    public = _model_name(evals["public"])
    assert list(table) == [public, _model_name(evals["mine"])]
    assert table[public]["FollowIR p-MRR"] == alone[public]["FollowIR p-MRR"]
    text = files.markdown.read_text()
    assert f"- `FollowIR p-MRR`: {NO_PER_QUERY}" in text


@pytest.mark.usefixtures("no_figures")
def test_an_mteb_folder_as_mteb_writes_it(
    evals: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """mteb's own layout (its cache: results/<org__model>/<revision>/), its ``og`` scores
    giving each set's Score; a task the report has no column for is skipped with a warning."""
    folder = tmp_path / "cache" / "results" / "org__public-model" / "abc123"
    folder.mkdir(parents=True)
    scores = {
        "Robust04InstructionRetrieval": (0.10, {"map_at_1000": 0.30}),
        "News21InstructionRetrieval": (-0.02, {"ndcg_at_5": 0.50}),
    }
    for task, (p_mrr, og) in scores.items():
        result = task_result(task, p_mrr, {"p-MRR": p_mrr, "og": og}, 1.0)
        (folder / f"{task}.json").write_text(json.dumps(result))
    other = task_result("SciFact", 0.7, {"ndcg_at_10": 0.7}, 1.0)
    (folder / "SciFact.json").write_text(json.dumps(other))
    (folder / "model_meta.json").write_text(json.dumps({"name": "org/public-model"}))
    files = report_runs([tmp_path / "cache", evals["mine"]], tmp_path / "r", FAST)
    row = _table(files.markdown.parent)["org/public-model"]
    assert row["FollowIR p-MRR"] == "4.00"  # (10 - 2) / 2, x100 like ours
    assert row["FollowIR Score"] == "40.00"  # MAP@1000 of Robust04, nDCG@5 of News21
    assert f"{folder / 'SciFact.json'}: mteb task 'SciFact' has no report column" in (
        capsys.readouterr().err
    )


def test_a_folder_that_is_neither_is_one_located_error(
    evals: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("hello\n")
    out = tmp_path / "r"
    code, err = invoke(["report", str(evals["mine"]), str(stray), "--out", str(out)], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: {stray}: not a dualview run folder"), err
    assert "eval result folder" in lines[0] and "mteb result folder" in lines[0]
    assert not out.exists()


@pytest.mark.usefixtures("no_figures")
def test_eval_folders_as_seeds_give_mean_and_pooled_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--seeds``: one eval folder per seed with the same arm names is one report of mean ±
    sd, each query's values pooled (averaged over the seeds in the paired test)."""
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    spec = f"paired={write_pairs(tmp_path / 'pairs')}"
    folders = []
    for seed, sign in ((1, 1.0), (2, -1.0)):  # the "seeds" of reranker rr: +50 and -50 p-MRR
        folders.append(tmp_path / f"s{seed}" / "eval")  # the same last name in both
        settings = RerankSettings([Overlap(sign=sign, name="rr")], "bm25", top_k=2)
        evaluate([], [spec], folders[-1], rerank=settings)
    out = tmp_path / "report"
    argv = ["report", *map(str, folders), "--seeds", "--out", str(out), "--resamples", "200"]
    code, err = invoke([*argv, "--compare", "rr@bm25:bm25", "--metrics", "paired p-MRR"], capsys)
    assert code == 0, err
    table = _table(out)
    assert (out / "report.md").read_text().startswith("### s1/eval + s2/eval\n")
    assert list(table) == ["bm25", "rr@bm25"]
    assert table["rr@bm25"]["paired p-MRR"] == "0.00" and table["bm25"]["paired p-MRR"] == "50.00"
    [comparison] = json.loads((out / "significance.json").read_text())
    assert comparison["n_queries"] == 4 and comparison["mean_arm"] == pytest.approx(0.0)
    with pytest.raises(DualviewError, match="its arms differ"):
        other = tmp_path / "eval-other"
        evaluate([], [spec], other, rerank=RerankSettings([Overlap(name="zz")], "bm25", top_k=2))
        report_runs([folders[0], other], tmp_path / "r", FAST, seeds=True)
    with pytest.raises(DualviewError, match="at least two folders"):
        report_runs([folders[0]], tmp_path / "r", FAST, seeds=True)


def test_folder_labels_are_the_fewest_trailing_parts_that_differ(tmp_path: Path) -> None:
    assert folder_labels([Path("runs/a"), Path("runs/b")]) == ["a", "b"]
    assert folder_labels([Path("x/s1/val"), Path("x/s2/val")]) == ["s1/val", "s2/val"]
    assert folder_labels([Path("p/q/val"), Path("r/q/val")]) == ["p/q/val", "r/q/val"]
    same = folder_labels([tmp_path / "v", tmp_path / "v"])  # one folder twice: its whole path
    assert same == [str(tmp_path / "v")] * 2
