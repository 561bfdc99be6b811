"""A saved LLM reranker is loaded by the ecosystem with our scores: as a sentence-transformers
``CrossEncoder`` (causal LM + ``LogitScore``), and as a plain ``*ForCausalLM`` folder (LoRA
merged) plus its prompt template, the form vLLM's /v1/score and mteb's rerankers take.
Tiny random Llama / Qwen2 LMs of `tests.tiny_lm`; with LoRA, and with a chat template."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import CrossEncoder
from transformers import AutoModelForCausalLM, AutoTokenizer

from dualview.models.llm_reranker import PROMPT_FILE, LlmReranker
from dualview.models.rerankers import load_reranker
from tests.test_llm_reranker import INSTRUCTION, PASSAGES, QUERY, make_tiny_lm, reranker_config
from tests.test_llm_reranker_gguf import CHAT

pytest.importorskip("peft")  # LoRA: dualview[lora]

QUERY_TEXT = f"{QUERY} {INSTRUCTION}"  # the query joined with its instruction (the default)
CASES = {
    "llama-lora": ("llama", {"lora": True}),  # its tokenizer adds BOS
    "qwen2-lora": ("qwen2", {"lora": True}),
    "qwen2-chat": ("qwen2", {"llm_reranker": {"chat_template": True}}),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def saved(request, tmp_path_factory) -> tuple[str, LlmReranker, np.ndarray, Path]:
    """(arch, model, its scores of `PASSAGES`, its saved folder); one per case."""
    arch, extra = CASES[request.param]
    tmp_path = tmp_path_factory.mktemp(request.param)
    folder = make_tiny_lm(tmp_path / "lm", arch)
    if "llm_reranker" in extra:
        tok = AutoTokenizer.from_pretrained(folder)
        tok.chat_template = CHAT
        tok.save_pretrained(folder)
    model = LlmReranker(reranker_config(folder, **extra))
    torch.manual_seed(1)
    with torch.no_grad():  # LoRA B starts at zero: make the adapter matter
        for name, param in model.backbone.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    n = len(PASSAGES)
    scores = model.score([QUERY] * n, [INSTRUCTION] * n, PASSAGES, batch_size=2)
    return arch, model, scores, model.save(tmp_path / "saved")


def _close(actual, expected) -> None:
    torch.testing.assert_close(
        torch.as_tensor(np.asarray(actual), dtype=torch.float32),
        torch.as_tensor(expected),
        atol=1e-5,
        rtol=0,
    )


def test_sentence_transformers_cross_encoder_gives_our_scores(saved) -> None:
    _, _, scores, folder = saved
    encoder = CrossEncoder(str(folder), device="cpu")
    _close(encoder.predict([(QUERY_TEXT, passage) for passage in PASSAGES], batch_size=2), scores)


def test_plain_causal_lm_with_the_prompt_template_gives_our_scores(saved) -> None:
    arch, model, scores, folder = saved
    lm = AutoModelForCausalLM.from_pretrained(folder).eval()
    assert type(lm).__name__ == {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[arch]
    assert not any("lora" in name for name, _ in lm.named_parameters())  # merged
    tok = AutoTokenizer.from_pretrained(folder)
    template = (folder / PROMPT_FILE).read_text(encoding="utf-8")
    true_id, false_id = model.answer_ids
    by_hand = []
    for passage in PASSAGES:
        ids = tok(template.format(query=QUERY_TEXT, passage=passage))["input_ids"]
        pair = [{"role": "query", "content": QUERY_TEXT}, {"role": "document", "content": passage}]
        assert tok.apply_chat_template(pair, tokenize=True, return_dict=True)["input_ids"] == ids
        with torch.no_grad():
            logits = lm(input_ids=torch.tensor([ids])).logits[0, -1]
        by_hand.append(float(logits[true_id] - logits[false_id]))
    _close(by_hand, scores)


def test_our_loader_reads_the_rendered_prompt_back(saved) -> None:
    _, model, scores, folder = saved
    loaded = load_reranker(folder, device="cpu")
    assert isinstance(loaded, LlmReranker) and loaded.description() == model.description()
    n = len(PASSAGES)
    _close(loaded.score([QUERY] * n, [INSTRUCTION] * n, PASSAGES), scores)
