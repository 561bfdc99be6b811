"""Padding-free chunks (`dualview.models.unpadded`) compute what the padded path computes.

Tolerances (fp32 on CPU): embeddings within 1e-5 absolute; the loss within 1e-5; every
parameter gradient within 1e-4 of the padded one relative to its largest entry, plus 1e-6
absolute (the key biases' true gradient is zero: what is left is rounding). Dropout is off
(eval mode): with it on, the two layouts draw different masks, as two chunkings do.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from dualview.data.schema import Document, Record
from dualview.errors import ConfigError
from dualview.models import unpadded
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.train.batching import build_batch
from dualview.train.objectives import RelationInfoNCE
from dualview.train.step import Chunking, contrastive_step

TEXTS = [
    "hello world",
    "a much longer passage about retrieval with instructions that goes on and on for a while",
    "short",
    "word " * 37,
    "the dual view of an instruction reverses its polarity",
]


def _pair(tmp_path: Path, pooling: str, name: str = "embedded:minilm") -> tuple[BiEncoder, ...]:
    padded = BiEncoder(ModelConfig(name_or_path=name, pooling=pooling)).eval()
    packed = BiEncoder(ModelConfig(name_or_path=name, pooling=pooling, unpadded=True)).eval()
    packed.load_state_dict(padded.state_dict())
    return padded, packed


def _tiny_xlmr(tmp_path: Path) -> str:
    """A random XLM-R-shaped backbone (RoBERTa positions: they start past the padding index)."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from dualview.resources import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("embedded:minilm"))
    config = AutoConfig.for_model(
        "xlm-roberta",
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=520,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(tmp_path / "xlmr")
    tok.save_pretrained(tmp_path / "xlmr")
    return str(tmp_path / "xlmr")


@pytest.mark.parametrize("pooling", ["mean", "cls", "last_token"])
def test_packed_embeddings_match_padded(tmp_path: Path, pooling: str) -> None:
    padded, packed = _pair(tmp_path, pooling)
    with torch.no_grad():
        want = padded.encode(TEXTS, "document", batch_size=8)
        got = packed.encode(TEXTS, "document", batch_size=8)
    assert packed.backbone.config._attn_implementation == unpadded.VARLEN
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    # the packed path really ran packed: its inputs carry no padding at all
    inputs = packed.tokenize(TEXTS, "document")
    assert unpadded.is_packed(inputs)
    assert inputs["input_ids"].shape == (
        1,
        int(packed.tokenize_ids(TEXTS, "document").lengths.sum()),
    )


def test_roberta_positions_match_padded(tmp_path: Path) -> None:
    padded, packed = _pair(tmp_path, "mean", _tiny_xlmr(tmp_path))
    assert unpadded.position_start(packed.backbone) == padded.tokenizer.pad_token_id + 1
    with torch.no_grad():
        want = padded.encode(TEXTS, "document")
        got = packed.encode(TEXTS, "document")
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_token_states_repadded_like_padded(tmp_path: Path) -> None:
    padded, packed = _pair(tmp_path, "mean")
    tokens = padded.tokenize_ids(TEXTS, "query")
    with torch.no_grad():
        inputs = padded.pad(tokens, range(len(TEXTS)), "query")
        want = padded.token_states(inputs)
        got = packed.token_states(packed.pad(tokens, range(len(TEXTS)), "query"))
    mask = inputs["attention_mask"].bool()
    longest = int(tokens.lengths.max())
    assert got.shape[:2] == (len(TEXTS), longest)
    assert torch.allclose(got[mask[:, :longest]], want[mask], atol=1e-5)
    assert not got[~mask[:, :longest]].any()  # zeros where the padded path has padding


def _records() -> list[Record]:
    docs = [Document(id=f"d{i}", text=text) for i, text in enumerate(TEXTS * 2)]
    return [
        Record(
            id=f"q{i}",
            view="plain",
            query=f"query number {i} " * (i + 1),
            instruction="find the passage",
            positives=[docs[i]],
            hard_negatives=[docs[i + 1], docs[i + 3]],
        )
        for i in range(4)
    ]


@pytest.mark.parametrize("chunking", [None, Chunking(max_items=3)], ids=["whole", "gradcache"])
def test_step_loss_and_gradients_match_padded(tmp_path: Path, chunking: Chunking | None) -> None:
    padded, packed = _pair(tmp_path, "mean")
    batch = build_batch(_records(), num_negatives=2, template="{query} {instruction}")
    results = []
    for model in (padded, packed):
        model.zero_grad(set_to_none=True)
        stats = contrastive_step(model, RelationInfoNCE(), batch, chunk_size=chunking)
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((stats, grads))
    (want, want_grads), (got, got_grads) = results
    assert abs(got.loss - want.loss) < 1e-5
    assert got.lengths == want.lengths
    assert got.padded_tokens == got.tokens < want.padded_tokens  # no padding left
    assert set(got_grads) == set(want_grads) and len(want_grads) > 50
    for name, grad in want_grads.items():
        scale = float(grad.abs().max()) or 1.0
        tolerance = 1e-4 * scale + 1e-6  # absolute part: key biases, whose true gradient is 0
        assert float((got_grads[name] - grad).abs().max()) <= tolerance, name


def test_unsupported_backbones_say_why() -> None:
    decoder = SimpleNamespace(config=SimpleNamespace(model_type="qwen2", is_decoder=False))
    assert "not supported padding-free" in unpadded.unsupported_reason(decoder)
    modern = SimpleNamespace(config=SimpleNamespace(model_type="modernbert"))
    assert "flash-attn" in unpadded.unsupported_reason(modern)
    with pytest.raises(ConfigError, match=r"model\.unpadded: model type 'qwen2'"):
        unpadded.enable(decoder)


def test_padding_share_of_chunks() -> None:
    lengths = [10, 6, 4, 4]
    assert unpadded.padding_share(lengths, [[0, 1], [2, 3]], lambda n: n) == pytest.approx(
        1 - 24 / 28
    )
    assert unpadded.padding_share(lengths, [[0], [1], [2], [3]], lambda n: n) == 0.0


def test_saved_model_does_not_name_the_packed_kernel(tmp_path: Path) -> None:
    """The folder loads anywhere: the attention implementation we register is not saved."""
    _, packed = _pair(tmp_path, "mean")
    packed.save(tmp_path / "model")
    assert unpadded.VARLEN not in (tmp_path / "model" / "config.json").read_text()
