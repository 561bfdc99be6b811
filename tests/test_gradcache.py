"""The one GradCache step (`dualview.train.gradcache.chunked_step`) replays each chunk's RNG
state, for every model family: with dropout on, the re-forward of a chunk in the backward
pass sees exactly the dropout masks of its no-grad forward, so the gradient is the plain
step's. Removing the replay makes these tests fail (dropout draws new masks). The last chunk
of the last group keeps its first-pass graph (``retain_last``): not run twice, same gradient,
same RNG state after the step; with ``retain_tokens`` the chunks before it that fit that
budget keep theirs too."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
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
from dualview.train.gradcache import kept_chunks
from dualview.train.objectives import RelationInfoNCE, build_objective
from dualview.train.rerank_step import rerank_step
from dualview.train.step import Chunking, contrastive_step
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

    def step(retain: bool = True, tokens: int = 0) -> None:
        chunking = Chunking(max_items=CHUNK, retain_last=retain, retain_tokens=tokens)
        contrastive_step(model, RelationInfoNCE(0.05), batch, chunk_size=chunking)

    return model, model.backbone, step


def _reranker(model: nn.Module):
    batch = build_batch(list(iter_records(FIXTURE))[:2], 30, "{query} {instruction}")
    loss = build_objective(LossConfig(objective="rerank_listwise", temperature=1.0))

    def step(retain: bool = True, tokens: int = 0) -> None:
        chunking = Chunking(max_items=CHUNK, retain_last=retain, retain_tokens=tokens)
        rerank_step(model, loss, batch, chunk_size=chunking)

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
    count = (len(seen) + 1) // 2
    first, replay = seen[:count], seen[count:]
    assert len(replay) == len(first) - 1 >= 2  # several chunks, each but the kept one run twice
    for before, again in zip(first, replay, strict=False):
        torch.testing.assert_close(again, before, rtol=0, atol=1e-6)
    # dropout is really on: the same chunks forwarded again (a later RNG state) differ
    seen, remove = _outputs(watched)
    step()
    remove()
    assert any(not torch.equal(a, b) for a, b in zip(first, seen[: len(first)], strict=True))


def _gradients(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _kept_against_twice(family: str, tmp_path: Path, tokens: int) -> int:
    """One step with every chunk run twice, one keeping the last chunk and those that fit
    ``tokens`` with it: the same gradient and RNG state after; how many forwards it saved."""
    torch.manual_seed(0)
    model, watched, step = FAMILIES[family](tmp_path)
    model.train()
    results = []
    for retain in (False, True):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(1)
        seen, remove = _outputs(watched)
        step(retain, tokens if retain else 0)
        remove()
        results.append((_gradients(model), torch.get_rng_state(), len(seen)))
    (plain, plain_rng, plain_runs), (kept, kept_rng, kept_runs) = results
    assert plain.keys() == kept.keys() and plain
    for name, grad in plain.items():
        torch.testing.assert_close(kept[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    assert torch.equal(kept_rng, plain_rng)
    return plain_runs - kept_runs


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_keeping_the_last_chunk_gives_the_gradient_and_rng_state_of_running_it_twice(
    family: str, tmp_path: Path
) -> None:
    assert _kept_against_twice(family, tmp_path, 0) == 1  # the kept chunk ran once


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_chunks_kept_within_the_token_budget_give_the_gradient_and_rng_state_of_running_twice(
    family: str, tmp_path: Path
) -> None:
    assert _kept_against_twice(family, tmp_path, 10**9) >= 2  # all of the last group ran once


@dataclass
class _Sized:
    """A `ChunkedGroup` stand-in: only its chunks' token counts matter to `kept_chunks`."""

    sizes: list[int]

    @property
    def chunks(self) -> list[list[int]]:
        return [[i] for i in range(len(self.sizes))]

    def chunk_tokens(self, chunk: list[int]) -> int:
        return self.sizes[chunk[0]]


@pytest.mark.parametrize(
    ("sizes", "budget", "kept"),
    [
        ([], 100, 0),  # no chunk
        ([50, 40, 10], 0, 1),  # the last chunk is always kept
        ([50, 40, 10], 49, 1),  # 40 + 10 = 50 > 49
        ([50, 40, 10], 50, 2),  # exactly the budget
        ([50, 40, 10], 99, 2),
        ([50, 40, 10], 100, 3),
        ([10, 90, 10], 30, 1),  # contiguous from the end: the 90 stops it
    ],
)
def test_kept_chunks_are_the_trailing_ones_within_the_budget(
    sizes: list[int], budget: int, kept: int
) -> None:
    assert kept_chunks(_Sized(sizes), budget) == kept
