"""Hostile model folders and templates (issue 35, items 7, 15 and 20).

- 7: a reranker folder given where a bi-encoder is expected is refused (not scored as an
  embedding model), and a reranker folder whose marker names another kind than its weights
  is an error (not a model with new random heads);
- 15: a backbone that cannot be loaded (missing folder, empty folder, unknown Hub name
  offline) is one located error for every model kind, in the library and from ``train``;
- 20: query templates and LLM-reranker prompts accept plain ``{field}`` placeholders only,
  with one validator wherever a template is configured.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dualview.config import validate_config
from dualview.errors import ConfigError
from dualview.models.config import ModelConfig
from dualview.models.pretrained import ModelLoadError
from dualview.models.rerankers import RERANKER_FILE, build_reranker, load_reranker
from dualview.pipeline.experiment import EvaluationSpec
from dualview.retrieval.encode import load_sentence_transformer
from dualview.retrieval.mine import MineConfig
from dualview.train.config import TrainConfig
from dualview.train.trainer import build_model
from tests.helpers import run_cli
from tests.tiny_lm import FIXTURE, byte_tokenizer, save_tiny_lm
from tests.train_tiny import make_tiny_encoder

KINDS = {
    "bi_encoder": "infonce",
    "cross_encoder": "rerank_bce",
    "llm_reranker": "rerank_bce",
}
SHORT = {"query_max_length": 16, "document_max_length": 16}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny encoder, a tiny causal LM, and a cross-encoder and an LLM reranker saved from
    them by dualview."""
    root = tmp_path_factory.mktemp("hostile-models")
    encoder = make_tiny_encoder(root / "encoder")
    lm = root / "lm"
    tokenizer = byte_tokenizer(lm, whole_words=("true", "false"))
    save_tiny_lm(lm, "qwen2", tokenizer, max_position_embeddings=512)
    cross = ModelConfig(kind="cross_encoder", name_or_path=str(encoder), **SHORT)
    build_reranker(cross).save(root / "cross")
    llm = ModelConfig(kind="llm_reranker", name_or_path=str(lm), **SHORT)
    build_reranker(llm).save(root / "llm")
    return {"encoder": encoder, "lm": lm, "cross": root / "cross", "llm": root / "llm"}


def _train_config(kind: str, name: str, tmp_path: Path) -> TrainConfig:
    data = {
        "model": {"kind": kind, "name_or_path": name},
        "loss": {"objective": KINDS[kind]},
        "data": {"train_file": str(FIXTURE)},
        "output_dir": str(tmp_path / "run"),
    }
    return validate_config(TrainConfig, data, "train.yaml")


# -- item 15: a backbone that cannot be loaded ---------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", ["/nope/model", "empty", "nope/missing-model"])
def test_an_unloadable_backbone_is_one_located_error_for_every_kind(
    kind: str, name: str, tmp_path: Path
) -> None:
    if name == "empty":  # a folder without a model: "Unrecognized model"
        name = str(tmp_path / "empty")
        Path(name).mkdir()
    with pytest.raises(ModelLoadError) as caught:
        build_model(_train_config(kind, name, tmp_path))
    message = str(caught.value)
    assert message.startswith(f"model.name_or_path: cannot load model {name!r}: ")
    assert "\n" not in message
    if name == "/nope/model":
        assert message.endswith(": no such folder")


def test_train_with_a_missing_backbone_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(
        f"model: {{kind: llm_reranker}}\nloss: {{objective: rerank_bce}}\n"
        f"data: {{train_file: {FIXTURE}}}\noutput_dir: {tmp_path / 'run'}\n"
    )
    result = run_cli("train", str(config), "--set", "model.name_or_path=/nope")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: model.name_or_path: cannot load model '/nope': no such folder"]


# -- item 7: a reranker where a bi-encoder is expected; a marker that lies ---------------------


@pytest.mark.parametrize("saved", ["cross", "llm"])
def test_a_reranker_folder_is_refused_as_a_bi_encoder(folders, saved: str) -> None:
    kind = json.loads((folders[saved] / RERANKER_FILE).read_text())["kind"]
    with pytest.raises(ConfigError, match=f"holds a reranker \\(kind {kind}: .*--reranker"):
        load_sentence_transformer(str(folders[saved]))


@pytest.mark.parametrize(
    ("removed", "why"),
    [
        ([RERANKER_FILE], r"config_sentence_transformers\.json says CrossEncoder"),
        ([RERANKER_FILE, "config_sentence_transformers.json"], "BertForSequenceClassification"),
    ],
)
def test_a_cross_encoder_without_our_marker_is_refused_as_a_bi_encoder(
    folders, tmp_path: Path, removed: list[str], why: str
) -> None:
    plain = tmp_path / "st-cross"
    shutil.copytree(folders["cross"], plain)
    for name in removed:
        (plain / name).unlink()
    (plain / "dualview_model.json").write_text('{"query_template": "{query} {instruction}"}')
    with pytest.raises(ConfigError, match=f"holds a reranker \\(kind cross_encoder: .*{why}"):
        load_sentence_transformer(str(plain))


def test_eval_refuses_a_reranker_as_model_with_exit_2(folders, tmp_path: Path) -> None:
    beir = Path(__file__).parent / "fixtures" / "eval" / "beir"
    out = tmp_path / "out"
    result = run_cli("eval", str(folders["llm"]), "-b", f"beir={beir}", "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"error: {folders['llm']}: holds a reranker (kind llm_reranker" in result.stderr
    assert not list(out.rglob("*.json"))  # nothing was scored


def _st_bi_encoder(encoder: Path, folder: Path) -> Path:
    """``encoder`` saved as a sentence-transformers bi-encoder folder (mean pooling)."""
    from sentence_transformers import SentenceTransformer

    SentenceTransformer(str(encoder), device="cpu").save(str(folder))
    return folder


def test_a_bi_encoder_folder_whose_weights_do_not_fit_is_an_error(folders, tmp_path) -> None:
    folder = _st_bi_encoder(folders["encoder"], tmp_path / "bi")
    shutil.copyfile(folders["lm"] / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(ModelLoadError, match=r"missing from the folder.*another kind of model"):
        load_sentence_transformer(str(folder))


def test_a_bi_encoder_without_the_pooler_it_never_reads_still_loads(folders, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    folder = _st_bi_encoder(folders["encoder"], tmp_path / "bi")
    weights = load_file(folder / "model.safetensors")
    kept = {k: v for k, v in weights.items() if not k.startswith("pooler.")}
    assert len(kept) < len(weights)
    save_file(kept, folder / "model.safetensors", metadata={"format": "pt"})
    assert load_sentence_transformer(str(folder)).get_embedding_dimension() == 32


def _with_marker(folder: Path, marker_of: Path, tmp_path: Path) -> Path:
    """A copy of ``folder`` whose `RERANKER_FILE` is the one of ``marker_of``."""
    copy = tmp_path / f"{folder.name}-as-{marker_of.name}"
    shutil.copytree(folder, copy)
    marker = json.loads((marker_of / RERANKER_FILE).read_text())
    marker.pop("answer_token_ids", None)  # checked against the tokenizer, before the weights
    (copy / RERANKER_FILE).write_text(json.dumps(marker))
    return copy


@pytest.mark.parametrize(
    ("weights", "marker", "label"),
    [
        ("cross", "llm", "llm-reranker"),  # BERT classifier read as a causal LM
        ("llm", "cross", "cross-encoder"),  # causal LM read as a classifier
        ("encoder", "cross", "cross-encoder"),  # a bare encoder: no scoring head
    ],
)
def test_a_marker_that_does_not_match_the_weights_is_an_error(
    folders, tmp_path: Path, weights: str, marker: str, label: str
) -> None:
    folder = _with_marker(folders[weights], folders[marker], tmp_path)
    with pytest.raises(ConfigError, match=f"{folder}: not a readable {label} folder") as caught:
        load_reranker(folder, "cpu")
    assert "missing from the folder" in str(caught.value)


def test_saved_rerankers_load_and_a_new_head_still_trains_from_an_encoder(folders) -> None:
    assert load_reranker(folders["cross"], "cpu").fingerprint
    assert load_reranker(folders["llm"], "cpu").fingerprint
    # Training a cross-encoder from a plain encoder gives it a new head: not an error.
    config = ModelConfig(kind="cross_encoder", name_or_path=str(folders["encoder"]), **SHORT)
    assert build_reranker(config) is not None


# -- item 20: templates take plain fields only ------------------------------------------------

BAD_FIELDS = ["{query:d}", "{query:>999999}", "{query!r}", "{query.x}", "{query[0]}", "{}"]


def _prompt(field: str) -> str:
    return f"Q: {field}\nP: {{passage}}\nAnswer:"


@pytest.mark.parametrize("field", BAD_FIELDS)
@pytest.mark.parametrize(
    ("config", "key", "value"),
    [
        (ModelConfig, "llm_reranker.prompt", _prompt),
        (ModelConfig, "query_template", lambda field: f"{field} {{instruction}}"),
        (MineConfig, "query_template", lambda field: f"{field} {{instruction}}"),
        (EvaluationSpec, "query_template", lambda field: f"{field} {{instruction}}"),
    ],
)
def test_a_template_with_more_than_plain_fields_is_refused_with_its_key(
    config, key: str, value, field: str
) -> None:
    data: dict = {"benchmarks": ["paired"]} if config is EvaluationSpec else {}
    if key == "llm_reranker.prompt":
        data.update(kind="llm_reranker", llm_reranker={"prompt": value(field)})
    else:
        data[key] = value(field)
    with pytest.raises(ConfigError) as caught:
        validate_config(config, data, "config.yaml")
    assert str(caught.value).startswith(f"config.yaml: {key}: ")
    assert f"{field}: only the plain fields" in str(caught.value)


@pytest.mark.parametrize("template", ["{query} {instruction}", "{instruction} {query}", "{query}"])
def test_plain_query_templates_and_literal_braces_pass(template: str) -> None:
    assert ModelConfig(query_template=template).query_template == template
    literal = "{{" + template + "}}"
    assert ModelConfig(query_template=literal).query_template == literal


def test_a_saved_cross_encoder_with_a_bad_template_is_located_at_its_file(
    folders, tmp_path: Path
) -> None:
    folder = tmp_path / "cross"
    shutil.copytree(folders["cross"], folder)
    marker = json.loads((folder / RERANKER_FILE).read_text())
    (folder / RERANKER_FILE).write_text(json.dumps({**marker, "query_template": "{query!r}"}))
    with pytest.raises(ConfigError, match=f"{folder / RERANKER_FILE}: query_template: "):
        load_reranker(folder, "cpu")


def test_eval_refuses_a_query_template_with_a_format_spec(tmp_path: Path) -> None:
    beir = Path(__file__).parent / "fixtures" / "eval" / "beir"
    args = ("-b", f"beir={beir}", "--out", str(tmp_path / "out"))
    result = run_cli("eval", "embedded:minilm", *args, "--query-template", "{query:>9}")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "error: --query-template: {query:>9}: only the plain fields" in result.stderr
    assert not (tmp_path / "out").exists()
