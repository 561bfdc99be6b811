"""The one GradCache step (`dualview.train.gradcache.chunked_step`) replays each chunk's RNG
state, for every model family: with dropout on, the re-forward of a chunk in the backward
pass sees exactly the dropout masks of its no-grad forward, so the gradient is the plain
step's. Removing the replay makes these tests fail (dropout draws new masks)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from dualview.config import validate_config
from dualview.data.jsonl import iter_records
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.models.cross_encoder import CrossEncoderReranker
from dualview.models.llm_reranker import LlmReranker
from dualview.train.batching import build_batch
from dualview.train.config import LossConfig
from dualview.train.objectives import RelationInfoNCE, build_objective
from dualview.train.rerank_step import rerank_step
from dualview.train.step import contrastive_step
from tests.step_checks import FIXTURE
from tests.test_llm_reranker import make_tiny_lm
from tests.train_tiny import make_tiny_encoder

CHUNK = 3  # items per chunk: several chunks per group


def _outputs(module: nn.Module) -> tuple[list[torch.Tensor], Callable[[], None]]:
    """Every forward output of ``module``, in call order (and the hook's remover)."""
    seen: list[torch.Tensor] = []

    def hook(_module, _inputs, output) -> None:
        tensor = output if isinstance(output, torch.Tensor) else output[0]
        seen.append(tensor.detach().clone())

    return seen, module.register_forward_hook(hook).remove


def _bi_encoder(tmp_path: Path):
    folder = make_tiny_encoder(tmp_path / "bert", dropout=0.3)
    model = BiEncoder(ModelConfig(name_or_path=str(folder), query_max_length=32))
    batch = build_batch(list(iter_records(FIXTURE))[:4], 30, "{query} {instruction}")

    def step() -> None:
        contrastive_step(model, RelationInfoNCE(0.05), batch, chunk_size=CHUNK)

    return model, model.backbone, step


def _reranker(model: nn.Module):
    batch = build_batch(list(iter_records(FIXTURE))[:2], 30, "{query} {instruction}")
    loss = build_objective(LossConfig(objective="rerank_listwise", temperature=1.0))

    def step() -> None:
        rerank_step(model, loss, batch, chunk_size=CHUNK)

    return model, model, step


def _cross_encoder(tmp_path: Path):
    folder = make_tiny_encoder(tmp_path / "bert", dropout=0.3)
    config = ModelConfig(
        kind="cross_encoder", name_or_path=str(folder), query_max_length=32, document_max_length=48
    )
    return _reranker(CrossEncoderReranker(config))


def _llm_reranker(tmp_path: Path):
    folder = make_tiny_lm(tmp_path / "llama", "llama")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "attention_dropout": 0.3}))
    data = {
        "kind": "llm_reranker",
        "name_or_path": str(folder),
        "query_max_length": 64,
        "document_max_length": 64,
        "lora": {"rank": 4, "alpha": 8, "dropout": 0.3},
    }
    return _reranker(LlmReranker(validate_config(ModelConfig, data, "test")))


FAMILIES = {"bi_encoder": _bi_encoder, "cross_encoder": _cross_encoder, "llm": _llm_reranker}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_chunk_is_re_run_with_the_dropout_masks_of_its_first_pass(
    family: str, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model, watched, step = FAMILIES[family](tmp_path)
    model.train()
    seen, remove = _outputs(watched)
    step()
    remove()
    first, replay = seen[: len(seen) // 2], seen[len(seen) // 2 :]
    assert len(first) == len(replay) >= 2  # several chunks, each run twice
    for before, again in zip(first, replay, strict=True):
        torch.testing.assert_close(again, before, rtol=0, atol=1e-6)
    # dropout is really on: the same chunks forwarded again (a later RNG state) differ
    seen, remove = _outputs(watched)
    step()
    remove()
    assert any(not torch.equal(a, b) for a, b in zip(first, seen[: len(first)], strict=True))
