"""Model kinds below training (`dualview.models.kinds`): a kind registered from outside the
package is loaded, described on its card, used as a teacher and evaluated as a reranker, and
nothing above `dualview.models` names a kind."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from dualview.api import TrainedModel
from dualview.config import validate_config
from dualview.errors import ConfigError, DualviewError
from dualview.eval.run import Summary
from dualview.eval.two_stage import check_reranker_folder
from dualview.hub.model_card import render_model_card
from dualview.models.kinds import MODEL_KINDS, CardFacts, SavedKind
from dualview.models.reranker import RERANKER_FILE, load_reranker
from dualview.train.config import TrainConfig
from dualview.train.families import FAMILIES, ModelFamily
from dualview.train.teacher import load_teacher

SRC = Path(__file__).parents[1] / "src" / "dualview"


class LengthScorer:
    """Score = the passage's length in words (a reranker kind from "another package")."""

    fingerprint = "length-scorer:1"

    def score(self, queries, instructions, passages, batch_size=32) -> np.ndarray:
        return np.asarray([len(p.split()) for p in passages], dtype=np.float32)


def _load_length(folder: Path, device: str | None) -> LengthScorer:
    return LengthScorer()


def _length_lines(model, info) -> list[str]:
    return [f"- Counts words up to {info.get('limit', '-')}"]


LENGTH_KIND = SavedKind(
    "test_length_scorer",
    CardFacts("A word-count reranker", "text-ranking", ("word-count",), ("score = len(words)",)),
    RERANKER_FILE,
    card_lines=_length_lines,
    load=_load_length,
)
#: a kind that embeds (no loader): its folders are first stages, never rerankers
EMBEDDING_KIND = SavedKind(
    "test_embedder", CardFacts("An embedder", "sentence-similarity", (), ()), RERANKER_FILE
)


@pytest.fixture
def registered():
    for kind in (LENGTH_KIND, EMBEDDING_KIND):
        MODEL_KINDS.register(kind.name, kind)
    yield
    for kind in (LENGTH_KIND, EMBEDDING_KIND):
        MODEL_KINDS.remove(kind.name)


def _folder(root: Path, kind: str) -> Path:
    root.mkdir(parents=True)
    info = {"kind": kind, "query_template": "{query} | {instruction}", "limit": 7}
    (root / RERANKER_FILE).write_text(json.dumps(info))
    return root


def test_a_registered_kind_is_loaded_evaluated_and_described(tmp_path, registered) -> None:
    folder = _folder(tmp_path / "length", LENGTH_KIND.name)
    assert isinstance(load_reranker(folder), LengthScorer)
    check_reranker_folder(str(folder))  # accepted as --reranker
    teacher = load_teacher(str(folder), "{query} {instruction}")
    assert teacher.score(["q"], ["i"], ["a b c"]).tolist() == [3.0]
    card = render_model_card(folder)
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["tags"][0] == "word-count" and meta["pipeline_tag"] == "text-ranking"
    assert "A word-count reranker" in card and "- Counts words up to 7" in card
    assert "score = len(words)" in card and "`{query} | {instruction}`" in card


def test_a_kind_that_embeds_is_no_reranker(tmp_path, registered) -> None:
    folder = _folder(tmp_path / "embedder", EMBEDDING_KIND.name)
    with pytest.raises(DualviewError, match="not a reranker folder"):
        check_reranker_folder(str(folder))
    with pytest.raises(ConfigError, match=r"test_embedder folder embeds .* first-stage MODEL"):
        load_reranker(folder)


def test_a_folder_of_an_unregistered_kind_is_one_located_error(tmp_path) -> None:
    folder = _folder(tmp_path / "nobody", "nobody_registered")
    where = re.escape(f"{folder / RERANKER_FILE}: field 'kind': unknown model kind")
    for call in (load_reranker, lambda f: check_reranker_folder(str(f))):
        with pytest.raises(ConfigError, match=where + r" 'nobody_registered'; known: bi_encoder"):
            call(folder)


def test_merged_summary_keeps_every_column_in_order() -> None:
    first = Summary(models=["a"], benchmarks=["b"], values={"a": {"b": {"m": 1.0}}})
    first.results = {"a": {"b": {"metrics": {"m": 1.0}}}}
    second = Summary(models=["r@a"], benchmarks=["b"], values={"r@a": {"b": {"m": 2.0}}})
    second.first_stage = {"r@a": {"b": {"m": 1.0}}}
    second.results = {"r@a": {"b": {"metrics": {"m": 2.0}}}}
    whole = Summary.merged([first, second])
    assert whole.models == ["a", "r@a"] and whole.benchmarks == ["b"]
    assert whole.values == {"a": {"b": {"m": 1.0}}, "r@a": {"b": {"m": 2.0}}}
    assert set(whole.results) == {"a", "r@a"} and whole.first_stage == second.first_stage


def test_no_branch_on_a_model_kind_outside_the_kinds() -> None:
    """The eval stage, two-stage evaluation, teachers, cards and the trainer name no kind:
    they ask the folder's `SavedKind` or the config's `ModelFamily`."""
    pattern = r'kind ?[!=]= ?"(bi_encoder|cross_encoder|llm_reranker)"|is_reranker|\bKINDS\['
    found = subprocess.run(
        ["grep", "-rnE", pattern, str(SRC)], capture_output=True, text=True, check=False
    ).stdout
    assert found == ""


def test_a_family_whose_saved_kind_is_unregistered_is_a_located_config_error() -> None:
    FAMILIES.register("test_unsaved", ModelFamily("test_unsaved"))
    try:
        data = {"model": {"kind": "test_unsaved"}, "data": {"train_file": "x"}, "output_dir": "o"}
        with pytest.raises(ConfigError, match=r"^t\.yaml: .*model\.kind: 'test_unsaved' saves"):
            validate_config(TrainConfig, data, "t.yaml")
    finally:
        FAMILIES.remove("test_unsaved")


def test_trained_model_loads_a_registered_reranker_kind_through_its_kind(
    tmp_path, registered
) -> None:
    folder = _folder(tmp_path / "length", LENGTH_KIND.name)
    trained = TrainedModel(
        path=folder, output_dir=tmp_path, steps=1, first_loss=None, last_loss=None
    )
    assert isinstance(trained.load(), LengthScorer)
