"""Issue 34: every metric of the report's table gets its paired statistics, or a line saying
why not (item 2: FollowIR p-MRR was a column with no test); a run folder's loss curves are
drawn whatever folder the report runs from, and a curve that cannot be drawn is a warning
(item 3). The run folder is a real one: the pipeline's eval stage, started from another
folder with a relative run folder, as `dualview run runs/x` does."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import dualview.report as report_module
from dualview.pipeline.build import eval_stage
from dualview.pipeline.experiment import Experiment
from dualview.report.collect import NO_PER_QUERY, metric_per_query
from dualview.report.run_report import manifest_path, report_runs
from tests.test_hostile_cli import invoke
from tests.train_tiny import make_tiny_encoder

STAGE = "eval-0123456789ab"
TRAINED = {"Ins-orig": "train-orig-0123456789ab", "Ins-DV": "train-dv-0123456789ab"}
SETS = {"alpha": 3, "beta": 1}  # queries per FollowIR set: unequal, so weights matter


def _followir(root: Path) -> Path:
    """Two FollowIR sets in the upstream layout (`SETS` queries each)."""
    for name, n in SETS.items():
        folder = root / name
        (folder / "qrels_og").mkdir(parents=True)
        (folder / "qrels_changed").mkdir()
        words = ["ocean tides", "mountain rivers", "desert winds"][:n]
        queries, corpus, og, changed = [], [], ["query-id\tcorpus-id\tscore"], ["x\ty\tz"]
        for i, topic in enumerate(words):
            qid = f"{name}{i}"
            queries.append({"_id": qid, "text": topic, "instruction_og": "alpha or beta"})
            queries[-1]["instruction_changed"] = "only beta"
            for k, extra in enumerate(["alpha", "beta", "", "unrelated gamma"]):
                corpus.append({"_id": f"{qid}d{k}", "title": "", "text": f"{topic} {extra}"})
            og += [f"{qid}\t{qid}d0\t1", f"{qid}\t{qid}d1\t1"]
            changed += [f"{qid}\t{qid}d0\t0", f"{qid}\t{qid}d1\t1"]
        for file, rows in (("queries.jsonl", queries), ("corpus.jsonl", corpus)):
            (folder / file).write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / "qrels_og" / "test.tsv").write_text("\n".join(og) + "\n")
        (folder / "qrels_changed" / "test.tsv").write_text("\n".join(changed) + "\n")
    return root


def _perturbed_tiny(folder: Path, seed: int) -> Path:
    """The tiny encoder with its weights moved by seeded noise (another model)."""
    from transformers import BertModel

    make_tiny_encoder(folder)
    model = BertModel.from_pretrained(str(folder))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.5 * torch.randn(param.shape, generator=generator))
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``PROJECT/run``: a run folder whose eval stage ran from ``PROJECT`` with the run folder
    given as the relative ``run`` (two trained arms with training logs, and a base row)."""
    root = tmp_path_factory.mktemp("headline")
    data = _followir(root / "followir")
    exp = Experiment.model_validate(
        {
            "name": "headline",
            "instructions": {"path": "gold:train", "views": ["orig", "dv"]},
            "mixes": [{"name": "Ins-orig", "preset": "ins-orig", "size": 4}],
            "training": {"base": "configs/train/minilm-cpu.yaml"},
            "evaluation": {"benchmarks": [f"followir={data}"], "include_base": True},
        }
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DUALVIEW_CACHE", str(root / "cache"))
        patch.chdir(root)
        run = Path("run")
        for seed, folder in enumerate(TRAINED.values(), start=1):
            _perturbed_tiny(run / folder / "model", seed)
            log = "".join(json.dumps({"step": s, "loss": 2.0 / s}) + "\n" for s in (1, 2, 3))
            (run / folder / "train_log.jsonl").write_text(log)
        (run / STAGE).mkdir()
        up = {folder: run / folder for folder in TRAINED.values()}
        eval_stage(exp, TRAINED, {"base": "embedded:minilm"})(run / STAGE, up)
        (run / "stages.json").write_text(json.dumps({"eval": STAGE}))
    yield root / "run"


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copied-run"
    shutil.copytree(run, copy)
    return copy


def _table(out: Path) -> dict[str, dict[str, str]]:
    rows = list(csv.DictReader((out / "report.csv").open()))
    return {row["configuration"]: row for row in rows if row["configuration"] != "best"}


# -- item 2: the headline metric's paired statistics ----------------------------------------


def test_followir_pmrr_gets_its_paired_test_and_its_panel(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list = []
    plot = report_module.difference_plot

    def recording(comparisons, path):
        drawn.extend(comparisons)
        return plot(comparisons, path)

    monkeypatch.setattr(report_module, "difference_plot", recording)
    out = tmp_path / "report"
    files = report_runs([project], out)

    table = _table(out)
    comparisons = json.loads(files.significance.read_text())
    pmrr = [c for c in comparisons if c["metric"] == "FollowIR p-MRR"]
    assert {(c["arm"], c["control"]) for c in pmrr} == {
        ("Ins-DV", "Ins-orig"),
        ("Ins-orig", "base"),
        ("Ins-DV", "base"),
    }
    for c in pmrr:  # every query of both sets, and the table's own numbers
        assert c["n_queries"] == sum(SETS.values())
        assert f"{c['mean_arm']:.2f}" == table[c["arm"]]["FollowIR p-MRR"]
        assert f"{c['mean_control']:.2f}" == table[c["control"]]["FollowIR p-MRR"]
        assert c["ci_low"] <= c["diff"] <= c["ci_high"]
    assert {c["metric"] for c in comparisons} == {"FollowIR p-MRR", "FollowIR Score"}
    assert {c.metric for c in drawn} == {"FollowIR p-MRR", "FollowIR Score"}
    assert out / "differences.png" in files.plots
    assert "Not tested" not in files.markdown.read_text()


def test_a_metric_of_parts_is_weighted_to_its_table_value() -> None:
    per_query = {
        "A/p-MRR": {"q1": 10.0, "q2": 20.0, "q3": 30.0},
        "B/p-MRR": {"q1": -40.0},
        "A/changed nDCG@5": {"q1": 1.0},
    }
    metrics = {"p-MRR": (20.0 - 40.0) / 2, "A/p-MRR": 20.0, "B/p-MRR": -40.0}
    values, why = metric_per_query("p-MRR", metrics, per_query)
    assert why == ""
    assert set(values) == {"A/q1", "A/q2", "A/q3", "B/q1"}
    assert sum(values.values()) / len(values) == pytest.approx(metrics["p-MRR"])
    # a metric with values of its own keeps them as they are
    assert metric_per_query("A/p-MRR", metrics, per_query) == (per_query["A/p-MRR"], "")
    # parts that do not give the stored value are not used
    values, why = metric_per_query("p-MRR", {**metrics, "p-MRR": 3.0}, per_query)
    assert values == {} and "A/p-MRR, B/p-MRR" in why
    assert metric_per_query("Score", {"Score": 0.5}, per_query) == ({}, NO_PER_QUERY)


def test_a_column_without_per_query_values_is_named_with_why(project: Path, tmp_path: Path) -> None:
    run = _copy(project, tmp_path)
    for path in (run / STAGE / "eval").glob("*/followir.json"):  # an older result file
        payload = json.loads(path.read_text())
        payload["per_query"] = {k: v for k, v in payload["per_query"].items() if "Score" not in k}
        path.write_text(json.dumps(payload))
    files = report_runs([run], tmp_path / "report")
    text = files.markdown.read_text()
    assert "Not tested (no paired statistics):\n- `FollowIR Score`: " + NO_PER_QUERY in text
    tested = {c["metric"] for c in json.loads(files.significance.read_text())}
    assert tested == {"FollowIR p-MRR"}


# -- item 3: manifest paths against the run folder ------------------------------------------


def test_the_report_draws_the_loss_curves_from_another_folder(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    stored = json.loads((project / STAGE / "configurations.json").read_text())["loss_logs"]
    assert stored == {label: f"{folder}/train_log.jsonl" for label, folder in TRAINED.items()}
    monkeypatch.chdir(tmp_path)
    code, err = invoke(["report", str(project), "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    assert (tmp_path / "r" / "loss.png").is_file()
    assert "warning" not in err


@pytest.mark.parametrize("style", ["started-elsewhere", "absolute", "moved-absolute"])
def test_old_run_folders_keep_their_loss_curves(
    style: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Run folders made before: paths relative to the folder the run started from, or
    absolute (also after the run folder was moved)."""
    run = _copy(project, tmp_path)
    prefix = {
        "started-elsewhere": "projects/x/run",
        "absolute": str(run),
        "moved-absolute": "/old/place/run",
    }[style]
    manifest = run / STAGE / "configurations.json"
    stored = json.loads(manifest.read_text())
    stored["loss_logs"] = {k: f"{prefix}/{v}" for k, v in stored["loss_logs"].items()}
    manifest.write_text(json.dumps(stored))
    monkeypatch.chdir(tmp_path)
    rows_dir = tmp_path / "r"
    code, err = invoke(["report", str(run), "--out", str(rows_dir)], capsys)
    assert code == 0, err
    assert (rows_dir / "loss.png").is_file() and "warning" not in err
    for folder in TRAINED.values():
        text = f"{prefix}/{folder}/train_log.jsonl"
        assert manifest_path(text, run) == run / folder / "train_log.jsonl"


def test_a_loss_curve_that_cannot_be_drawn_is_a_warning(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    run = _copy(project, tmp_path)
    (run / TRAINED["Ins-orig"] / "train_log.jsonl").unlink()
    (run / TRAINED["Ins-DV"] / "train_log.jsonl").write_text('{"event": "checkpoint"}\n')
    monkeypatch.chdir(tmp_path)
    code, err = invoke(["report", str(run), "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    missing = run / TRAINED["Ins-orig"] / "train_log.jsonl"
    empty = run / TRAINED["Ins-DV"] / "train_log.jsonl"
    assert f"warning: {missing}: training log of 'Ins-orig' does not exist" in err
    assert f"warning: {empty}: training log of 'Ins-DV' has no loss values" in err
    assert not (tmp_path / "r" / "loss.png").exists()


def test_a_damaged_loss_log_list_is_a_located_error(project: Path, tmp_path: Path, capsys) -> None:
    run = _copy(project, tmp_path)
    manifest = run / STAGE / "configurations.json"
    stored = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**stored, "loss_logs": ["train_log.jsonl"]}))
    code, err = invoke(["report", str(run), "--out", str(tmp_path / "r")], capsys)
    assert code == 2
    assert err.strip() == f"error: {manifest}: loss_logs: expected an object of path strings"
    assert not (tmp_path / "r").exists()


def test_error_analysis_without_its_benchmark_texts_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A result file names its data files as `dualview eval` was given them (relative to the
    folder it ran in): read from elsewhere, the flipped queries lose their texts, not silently."""
    from dualview.report import ReportOptions, write_report
    from dualview.report.collect import collect_rows
    from tests.test_report_flips import ARM_A, ARM_B, _bench, _eval_json

    monkeypatch.chdir(tmp_path)
    files = _bench(Path("bench"))
    _eval_json(tmp_path / "eval" / "a", files, ARM_A)
    _eval_json(tmp_path / "eval" / "b", files, ARM_B)
    rows = collect_rows(tmp_path / "eval", {"A": "a", "B": "b"})
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    options = ReportOptions(error_pairs=[("A", "B")], n_resamples=200)
    markdown = write_report(rows, tmp_path / "r", "t", options).markdown.read_text()
    assert "### Error analysis: A vs B on paired" in markdown
    err = capsys.readouterr().err
    assert "warning: bench: the benchmark's pairs.jsonl and corpus.jsonl" in err


# -- issue 36 item 3: arms of a second experiment joined by seed -----------------------------


def _second_experiment(project: Path, tmp_path: Path) -> Path:
    """A copy of the run whose only trained arm is ``Ins-DV`` under the name ``Ins-DV-2``, and
    whose ``base`` row is another model (so a report that kept it would show)."""
    run = _copy(project, tmp_path)
    manifest = run / STAGE / "configurations.json"
    stored = json.loads(manifest.read_text())
    models = stored["models"]
    stored["models"] = {"base": models["Ins-DV"], "Ins-DV-2": models["Ins-DV"]}
    stored["loss_logs"] = {"Ins-DV-2": stored["loss_logs"]["Ins-DV"]}
    manifest.write_text(json.dumps(stored))
    return run


def test_join_adds_a_second_runs_arms_and_leaves_out_its_base(
    project: Path, tmp_path: Path, capsys
) -> None:
    other = _second_experiment(project, tmp_path)
    out = tmp_path / "joined"
    argv = ["report", str(project), "--join", str(other), "--out", str(out), "--resamples", "200"]
    pairs = ["--compare", "Ins-DV-2:Ins-orig", "--compare", "Ins-DV-2:Ins-DV"]
    code, err = invoke([*argv, *pairs], capsys)
    assert code == 0, err
    table = _table(out)
    alone = _table(report_runs([project], tmp_path / "alone").markdown.parent)
    assert list(table) == ["base", "Ins-orig", "Ins-DV", "Ins-DV-2"]
    assert (out / "report.md").read_text().startswith("### run with copied-run\n")
    assert table["base"] == alone["base"] != {**alone["Ins-DV"], "configuration": "base"}
    assert {**table["Ins-DV-2"], "configuration": "Ins-DV"} == alone["Ins-DV"]
    comparisons = json.loads((out / "significance.json").read_text())
    same = [c for c in comparisons if c["control"] == "Ins-DV"]
    assert same and all(c["diff"] == 0 and c["n_queries"] == 4 for c in same)
    assert all(c["arm"] == "Ins-DV-2" for c in comparisons)


def test_join_needs_one_run_folder_per_run_folder_and_an_out(
    project: Path, tmp_path: Path, capsys
) -> None:
    other = _second_experiment(project, tmp_path)
    code, err = invoke(["report", str(project), "--join", str(other), "--join", str(other)], capsys)
    assert code != 0 and "one run folder per run folder (1)" in err
    code, err = invoke(["report", str(project), "--join", str(other)], capsys)
    assert code != 0 and "give --out" in err
