"""Model cards publish only the model's own numbers, with metadata the Hub accepts.

- a result JSON is the model's only when its recorded fingerprint is the folder's (issue 34:
  a cross-encoder's card took the base bi-encoder's results and exited 0);
- ``--allow-other-model-results`` keeps them, visibly marked, out of the model-index;
- ``base_model`` is a Hub id, ``dataset.type`` a real dataset id (read from the Hub cache
  the data came from) or no entry for local data, the model-index is named after the model,
  metrics carry mteb's keys on one stated scale.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from huggingface_hub import ModelCard
from huggingface_hub.utils import validate_repo_id

from dualview.eval.mteb_compat import IR_KEYS
from dualview.eval.run import evaluate
from dualview.eval.two_stage import RerankSettings
from dualview.hub.card_results import hub_dataset, metric_type
from dualview.hub.model_card import (
    EMBEDDED_ENCODER_HUB_ID,
    SCALE,
    base_model_id,
    card_metadata,
    render_model_card,
)
from tests.conftest import FIXTURES
from tests.helpers import run_cli
from tests.train_tiny import make_tiny_encoder

PAIRED = FIXTURES / "eval" / "paired"
ROBUST04 = FIXTURES / "eval" / "followir" / "robust04"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def _other_weights(source: Path, folder: Path) -> Path:
    """A copy of the tiny encoder with other weights (another model, same architecture)."""
    from transformers import BertModel

    model = BertModel.from_pretrained(str(source))
    with torch.no_grad():
        model.embeddings.word_embeddings.weight.add_(0.05)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copyfile(source / name, folder / name)
    return folder


def _result(folder: Path) -> Path:
    [path] = [
        p for p in folder.rglob("*.json") if p.name != "summary.json" and "mteb" not in p.parts
    ]
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny bi-encoder ``mine`` (in its training run's folder), another one ``other``, a
    tiny cross-encoder ``ce``, and eval results of each on the local paired set."""
    from dualview.models.config import ModelConfig
    from dualview.models.cross_encoder import CrossEncoderReranker

    root = tmp_path_factory.mktemp("honest")
    mine = make_tiny_encoder(root / "runs" / "tiny-dv" / "model")
    train = {"model": {"name_or_path": "embedded:minilm"}, "output_dir": "runs/tiny-dv"}
    (mine / "dualview_train.yaml").write_text(yaml.safe_dump(train))
    other = _other_weights(mine, root / "other")
    torch.manual_seed(0)
    ce = CrossEncoderReranker(ModelConfig(kind="cross_encoder", name_or_path=str(other))).save(
        root / "ce"
    )
    paired = [f"paired={PAIRED}"]
    evaluate([str(mine)], paired, root / "eval-mine", cache=False, device="cpu")
    evaluate([str(other)], paired, root / "eval-other", cache=False, device="cpu")
    rerank = RerankSettings([str(ce)], "bm25", 3)
    evaluate([], paired, root / "eval-ce", cache=False, device="cpu", rerank=rerank)
    return {"mine": mine, "other": other, "ce": ce, "root": root}


def test_model_card_refuses_another_models_results(models: dict[str, Path]) -> None:
    """The issue's case: a card given results of another model stops with one line naming
    the result file, exit 2, and the card on disk is left as it was."""
    card = models["mine"] / "README.md"
    card.write_text("the card before\n")
    result = _result(models["root"] / "eval-other")
    done = run_cli("model-card", str(models["mine"]), "--eval", str(models["root"] / "eval-other"))
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert errors[0].startswith(f"error: {result}: model.fingerprint: ")
    assert "--allow-other-model-results" in errors[0]
    assert card.read_text() == "the card before\n"


def test_a_cross_encoder_card_refuses_the_bi_encoders_results(models: dict[str, Path]) -> None:
    """A reranker's results are its own through ``rerank.reranker.fingerprint``; a
    bi-encoder's results are not a reranker's, nor a reranked run a bi-encoder's."""
    from dualview.errors import DataError

    ce_results = models["root"] / "eval-ce"
    card = render_model_card(models["ce"], [ce_results])
    assert "reranks the top 3 of `bm25`" in card
    with pytest.raises(DataError, match=r"rerank\.reranker\.fingerprint: .*without a reranker"):
        render_model_card(models["ce"], [models["root"] / "eval-other"])
    with pytest.raises(DataError, match=r"model\.fingerprint: .*two-stage column"):
        render_model_card(models["other"], [ce_results])
    assert "| paired |" in render_model_card(models["other"], [models["root"] / "eval-other"])


def test_allowed_other_results_are_marked_and_left_out_of_the_index(
    models: dict[str, Path],
) -> None:
    folder = models["root"] / "eval-other"
    done = run_cli(
        "model-card", str(models["mine"]), "--eval", str(folder), "--allow-other-model-results"
    )
    assert done.returncode == 0, done.stderr
    card = (models["mine"] / "README.md").read_text()
    assert "**Warning: results of another model.**" in card
    assert f"`{_result(folder)}`: model '{models['other']}' has fingerprint" in card
    assert "| paired * | p-MRR |" in card
    assert "model-index" not in _front_matter(card)


def test_results_in_another_precision_are_the_models_own(models: dict[str, Path]) -> None:
    """A result of the same weights run in bf16 records a fingerprint with the precision;
    the card recomputes it for that precision instead of refusing it."""
    out = models["root"] / "eval-bf16"
    evaluate([str(models["mine"])], [f"paired={PAIRED}"], out, cache=False, device="cpu",
             precision="bf16")  # fmt: skip
    assert json.loads(_result(out).read_text())["model"]["precision"] == "bf16"
    assert "| paired | p-MRR |" in render_model_card(models["mine"], [out])


def _fake_hub_cache(root: Path, repo: str, source: Path) -> Path:
    """A Hub cache holding ``repo`` (a dataset) at `REVISION`, as ``snapshot_download`` left it."""
    folder = root / f"datasets--{repo.replace('/', '--')}"
    shutil.copytree(source, folder / "snapshots" / REVISION)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REVISION)
    return root


def test_model_index_holds_hub_dataset_ids_and_mteb_metric_keys(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FollowIR read from the Hub (a cache the offline ``snapshot_download`` finds) gives an
    entry whose dataset is the repository and revision the files came from; the local
    paired set gives none. huggingface_hub parses the block into evaluation results."""
    import huggingface_hub.constants

    cache = _fake_hub_cache(tmp_path / "hf", "jhu-clsp/robust04-instructions", ROBUST04)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    out = tmp_path / "eval"
    specs = ["followir:robust04", f"paired={PAIRED}"]
    evaluate([str(models["mine"])], specs, out, cache=False, device="cpu")
    followir = json.loads(next(out.rglob("followir-robust04.json")).read_text())

    card = render_model_card(models["mine"], [out])
    meta = _front_matter(card)
    [index] = meta["model-index"]
    assert index["name"] == "tiny-dv"  # the run that saved it, as its training config says
    [entry] = index["results"]
    assert entry["dataset"] == {
        "type": "jhu-clsp/robust04-instructions",
        "name": "followir Robust04",
        "split": "test",
        "revision": REVISION,
    }
    metrics = {m["type"]: m["value"] for m in entry["metrics"]}
    assert metrics["p-MRR"] == round(followir["metrics"]["Robust04/p-MRR"], 4)
    assert metrics["score"] == round(100 * followir["metrics"]["Robust04/Score"], 4)
    changed = followir["metrics"]["Robust04/changed MAP@1000"]
    assert metrics["changed_map_at_1000"] == round(100 * changed, 4)
    assert metrics["main_score"] == metrics["p-MRR"]
    parsed = ModelCard(card).data.eval_results
    assert {r.dataset_type for r in parsed} == {"jhu-clsp/robust04-instructions"}
    for result in parsed:
        validate_repo_id(result.dataset_type)
        assert "@" not in result.metric_type and " " not in result.metric_type
    assert "| paired | p-MRR |" in card  # local data: in the table, not in the index
    assert card.count(SCALE) == 1


def test_hub_dataset_reads_the_hub_cache_layout() -> None:
    snapshot = f"/c/hub/datasets--BeIR--scifact/snapshots/{REVISION}"
    assert hub_dataset(f"{snapshot}/corpus.jsonl") == ("BeIR/scifact", REVISION)
    assert hub_dataset(f"{snapshot}/qrels/test.tsv") == ("BeIR/scifact", REVISION)
    assert hub_dataset(PAIRED / "pairs.jsonl") is None
    assert hub_dataset("/data/datasets--x/corpus.jsonl") is None


def test_metric_types_are_mtebs_keys() -> None:
    for ours, mteb in IR_KEYS.items():
        assert metric_type(ours) == mteb
    assert metric_type("p-MRR") == "p-MRR"
    assert metric_type("Recall@100") == "recall_at_100"
    assert metric_type("pairwise accuracy") == "pairwise_accuracy"


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("embedded:minilm", EMBEDDED_ENCODER_HUB_ID),
        ("minilm", EMBEDDED_ENCODER_HUB_ID),
        ("BAAI/bge-small-en-v1.5", "BAAI/bge-small-en-v1.5"),
        ("/abs/path/to/model", None),
        ("./runs/x/model", None),
        ("bad//name", None),
        ("", None),
    ],
)
def test_base_model_is_a_hub_id_or_absent(base: str, expected: str | None) -> None:
    meta = card_metadata("m", {"model": {"name_or_path": base}}, [], "apache-2.0")
    assert meta.get("base_model") == expected
    assert base_model_id(base) == expected


def test_base_model_of_an_existing_local_folder_is_absent(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "base").mkdir(parents=True)
    assert base_model_id("runs/base") is None


def test_the_card_is_named_after_the_model_not_its_parent_folder(tmp_path: Path) -> None:
    """A folder saved on its own is named by itself; one its training run saved (``RUN/model``)
    by the run it records; a copy moved elsewhere by its own name again."""
    from dualview.models.reranker import RERANKER_FILE

    alone = tmp_path / "outputs" / "my-ce"
    alone.mkdir(parents=True)
    (alone / RERANKER_FILE).write_text(json.dumps({"kind": "cross_encoder"}))
    assert "\n# my-ce\n" in render_model_card(alone)

    run = tmp_path / "runs" / "ins-dv-1" / "model"
    run.mkdir(parents=True)
    (run / "dualview_train.yaml").write_text(yaml.safe_dump({"output_dir": "runs/ins-dv-1"}))
    assert "\n# ins-dv-1\n" in render_model_card(run)
    moved = tmp_path / "publish" / "dv-minilm"
    shutil.copytree(run, moved)
    assert "\n# dv-minilm\n" in render_model_card(moved)
