"""Decoder-only retrievers: tiny random Llama / Qwen2 backbones, last-token pooling on an
appended EOS with left padding, LoRA training, saving (merged + adapter) and exact resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dualview.config import validate_config
from dualview.errors import ConfigError
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.models.decoder import ADAPTER_DIR, load_adapter
from dualview.train.config import TrainConfig
from dualview.train.trainer import LOG_FILE, Trainer
from tests.tiny_lm import ARCHS, FIXTURE, byte_tokenizer, save_tiny_lm, word_tokenizer

pytest.importorskip("peft")  # dualview[lora], installed by dualview[dev]

EPOCHS = 8
SPECIALS = ["<unk>", "<pad>", "<s>", "</s>"]
TEXTS = [
    "caffeine",
    "effects of caffeine on sleep in healthy adults",
    "Bicycle lanes in Copenhagen carry more than forty percent of commuters",
    "sleep",
]


def make_tiny_decoder(folder: Path, arch: str) -> Path:
    """A tiny random LM: Llama-like words of the fixture with BOS, or Qwen2's byte-level
    tokenizer without."""
    if arch == "llama":
        tokenizer = word_tokenizer(folder, FIXTURE.read_text(encoding="utf-8"), SPECIALS)
    else:
        tokenizer = byte_tokenizer(folder)
    return save_tiny_lm(folder, arch, tokenizer, max_position_embeddings=256)


@pytest.fixture(params=sorted(ARCHS))
def decoder(request, tmp_path: Path) -> tuple[str, Path]:
    return request.param, make_tiny_decoder(tmp_path / request.param, request.param)


def _model_config(path: Path, lora: bool = False) -> ModelConfig:
    lora_cfg = {"rank": 4, "alpha": 8, "dropout": 0.1} if lora else None
    data = {
        "name_or_path": str(path),
        "pooling": "last_token",
        "query_max_length": 24,
        "document_max_length": 40,
        "lora": lora_cfg,
    }
    return validate_config(ModelConfig, data, "test")


def _slow_reference(model: BiEncoder, text: str, kind: str) -> torch.Tensor:
    """One text alone, no padding: the last position's hidden state, normalised."""
    ids = torch.tensor([model.tokenize_ids([text], kind).ids.tolist()])
    with torch.no_grad():
        hidden = model.backbone(input_ids=ids, attention_mask=torch.ones_like(ids))
    return torch.nn.functional.normalize(hidden.last_hidden_state[0, -1], dim=-1)


def test_eos_appended_left_padded_and_equal_to_one_text_at_a_time(decoder) -> None:
    arch, path = decoder
    model = BiEncoder(_model_config(path)).eval()
    tok = model.tokenizer
    for text in TEXTS:
        ids = model.tokenize_ids([text], "document").ids.tolist()
        assert ids[-1] == tok.eos_token_id and ids.count(tok.eos_token_id) == 1
        assert (ids[0] == tok.bos_token_id) == (arch == "llama")  # BOS kept as it was
    long_text = " ".join(["caffeine sleep"] * 40)
    truncated = model.tokenize_ids([long_text], "query").ids.tolist()
    assert len(truncated) == 24 and truncated[-1] == tok.eos_token_id  # EOS survives truncation
    inputs = model.tokenize(TEXTS, "document")
    mask = inputs["attention_mask"]
    assert mask[:, -1].all() and not mask[:, 0].all()  # left padding
    batch = model.encode(TEXTS, "document", batch_size=len(TEXTS))
    for row, text in zip(batch, TEXTS, strict=True):
        torch.testing.assert_close(row, _slow_reference(model, text, "document"), atol=2e-5, rtol=0)
    # and the pooling is not trivially the same for every text
    assert (batch[0] - batch[1]).abs().max() > 1e-3


def test_lora_without_matching_modules_is_a_config_error(decoder) -> None:
    _, path = decoder
    config = _model_config(path, lora=True).model_copy(
        update={
            "lora": _model_config(path, lora=True).lora.model_copy(
                update={"target_modules": ["nope"]}
            )
        }
    )
    with pytest.raises(ConfigError, match=r"model\.lora"):
        BiEncoder(config)


def _train_config(path: Path, out: Path) -> TrainConfig:
    data = {
        "model": _model_config(path, lora=True).model_dump(mode="json"),
        "data": {"train_file": str(FIXTURE), "num_negatives": 3, "num_workers": 0},
        "loss": {"objective": "inf_multivariate", "inf_sets": ["P", "I"]},
        "optim": {"lr": 5e-3, "warmup_steps": 0, "schedule": "constant"},
        "output_dir": str(out),
        "batch_size": 4,
        "epochs": EPOCHS,
        "checkpoint_every": 3,
        "keep_checkpoints": 20,
        "seed": 3,
    }
    return validate_config(TrainConfig, data, "test")


def _losses(out: Path) -> list[float]:
    lines = (out / LOG_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["loss"] for line in lines]


def test_lora_trains_saves_merged_and_adapter_and_resumes_exactly(decoder, tmp_path) -> None:
    from sentence_transformers import SentenceTransformer

    _, path = decoder
    straight = tmp_path / "straight"
    trainer = Trainer(_train_config(path, straight))
    model = trainer.model
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)  # only the adapters train
    result = trainer.train()
    losses = _losses(straight)
    two_epochs = 2 * len(losses) // EPOCHS  # batches differ per epoch: average two
    assert sum(losses[-two_epochs:]) < 0.9 * sum(losses[:two_epochs]), losses

    folder = result.model_dir
    assert (folder / ADAPTER_DIR / "adapter_config.json").is_file()
    mine = model.encode(TEXTS, "document")
    # merged form: a plain sentence-transformers model, peft not involved
    st = SentenceTransformer(str(folder), device="cpu")
    theirs = st.encode_document(TEXTS, convert_to_tensor=True)
    torch.testing.assert_close(theirs, mine, atol=2e-5, rtol=0)
    assert not any("lora" in k for k in load_file(str(folder / "model.safetensors")))
    # adapter form: a fresh base + the saved adapter
    fresh = BiEncoder(_model_config(path, lora=True))
    untrained = fresh.encode(TEXTS, "document")
    assert (untrained - mine).abs().max() > 1e-3  # training changed the embeddings
    load_adapter(fresh.backbone, folder)
    torch.testing.assert_close(fresh.encode(TEXTS, "document"), mine, atol=1e-6, rtol=0)

    # exact resume: restart from the step-3 checkpoint in a new folder (LoRA dropout on, so
    # the RNG state matters) and reach the same adapter weights and the same losses
    resumed = tmp_path / "resumed"
    shutil.copytree(
        straight / "checkpoints" / "step-00000003", resumed / "checkpoints" / "step-00000003"
    )
    lines = (straight / LOG_FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    (resumed / LOG_FILE).write_text("".join(lines[:3]), encoding="utf-8")
    Trainer(_train_config(path, resumed)).train(resume=True)
    assert _losses(resumed) == losses
    adapter = "lora_adapter/adapter_model.safetensors"
    a, b = load_file(str(straight / "model" / adapter)), load_file(str(resumed / "model" / adapter))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
