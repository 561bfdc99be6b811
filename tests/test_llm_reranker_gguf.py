"""LLM rerankers on the embedded GGUF models (`dualview.models.gguf`): a name of the table
loads the assembled file through transformers (dequantized) with its chat template, and
truncation cuts the two texts, never the template's suffix that holds the answer position.

The GGUF here is a tiny random Qwen2 LM of `tests.tiny_lm` written with ``gguf``'s writer
(float32 tensors), registered in the table under a test name and placed in a temporary cache
by the real `assemble_gguf`."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest
import torch
from gguf import GGUFWriter
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

import dualview.synth.backends.gguf as synth_gguf
from dualview.errors import ConfigError
from dualview.models import gguf
from dualview.models.decoder import ADAPTER_DIR
from dualview.models.llm_reranker import LlmReranker
from dualview.models.reranker import RERANKER_FILE
from dualview.models.rerankers import load_reranker
from dualview.resources import MissingExtra
from tests.test_llm_reranker import INSTRUCTION, PASSAGES, QUERY, make_tiny_lm, reranker_config

#: A ChatML template as Qwen2.5's, without its default system turn.
CHAT = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: The end of the rendered prompt: the question, then the template's suffix.
SUFFIX = "Answer true or false.\nAnswer:<|im_end|>\n<|im_start|>assistant\n"
TEST_NAME = "embedded:tiny-test"
_LAYER = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
_TOP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def _gguf_name(name: str) -> str:
    """llama.cpp's tensor name of a Qwen2 weight."""
    if name in _TOP:
        return _TOP[name]
    _, _, layer, rest = name.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{_LAYER[module]}.{kind}"


def write_tiny_gguf(hf_folder: Path, target: Path) -> Path:
    """The Qwen2 LM and byte-level tokenizer of ``hf_folder`` as a float32 GGUF with `CHAT`."""
    model = AutoModelForCausalLM.from_pretrained(hf_folder)
    tok = AutoTokenizer.from_pretrained(hf_folder)
    cfg = model.config
    writer = GGUFWriter(target, "qwen2")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    vocab = tok.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in tok.all_special_tokens else 1 for t in tokens])
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in merges])
    writer.add_eos_token_id(tok.eos_token_id)
    writer.add_pad_token_id(tok.pad_token_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT)
    for name, tensor in model.state_dict().items():
        writer.add_tensor(_gguf_name(name), tensor.float().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target


@pytest.fixture
def tiny_qwen(tmp_path: Path) -> Path:
    """A tiny Qwen2 LM folder whose tokenizer has `CHAT` as its chat template."""
    folder = make_tiny_lm(tmp_path / "qwen2", "qwen2")
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = CHAT
    tok.save_pretrained(folder)
    return folder


@pytest.fixture
def embedded_tiny(tiny_qwen: Path, tmp_path: Path, monkeypatch) -> str:
    """`TEST_NAME` in the table of embedded GGUFs, assembled into a temporary cache."""
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    source = write_tiny_gguf(tiny_qwen, tmp_path / "tiny.gguf")
    spec = gguf.EmbeddedGGUF(
        model=TEST_NAME,
        file_name="tiny-test.gguf",
        sha256=gguf.sha256_file(source),
        package_prefix="no_such_dualview_tiny_part",
        n_parts=1,
        extra="models",
    )
    monkeypatch.setitem(gguf.EMBEDDED_GGUFS, TEST_NAME, spec)
    target = tmp_path / "cache" / "models" / spec.file_name
    gguf.assemble_gguf([source], target, spec.sha256)
    return TEST_NAME


def _scores(model: LlmReranker, batch_size: int = 32):
    n = len(PASSAGES)
    return model.score([QUERY] * n, [INSTRUCTION] * n, PASSAGES, batch_size=batch_size)


def test_synthesis_reads_the_one_table() -> None:
    assert synth_gguf.EMBEDDED_GGUFS is gguf.EMBEDDED_GGUFS
    assert synth_gguf.embedded_gguf_path is gguf.embedded_gguf_path


def test_an_embedded_gguf_name_loads_with_its_chat_template(
    embedded_tiny: str, tiny_qwen: Path, tmp_path: Path
) -> None:
    model = LlmReranker(reranker_config(Path(embedded_tiny)))  # type: ignore[arg-type]
    assert model.chat_template  # on by default for an embedded GGUF
    ids = model.tokenize_pairs([f"{QUERY} {INSTRUCTION}"], ["sleep"]).ids.tolist()
    text = model.tokenizer.decode(ids)
    assert text.startswith("<|im_start|>user\nJudge whether") and text.endswith(SUFFIX)
    assert f"Query: {QUERY} {INSTRUCTION}\nPassage: sleep\n" in text
    # the dequantized GGUF is the folder's LM: the same scores as the folder with the template
    folder = LlmReranker(reranker_config(tiny_qwen, llm_reranker={"chat_template": True}))
    expected = _scores(folder)
    torch.testing.assert_close(
        torch.tensor(_scores(model)), torch.tensor(expected), atol=1e-5, rtol=0
    )
    plain = _scores(LlmReranker(reranker_config(tiny_qwen)))  # the folder's default: no template
    assert abs(plain - expected).max() > 1e-4
    saved = model.save(tmp_path / "saved")
    info = json.loads((saved / RERANKER_FILE).read_text())  # the template baked into the prompt
    assert info["prompt"].startswith("<|im_start|>user\n") and "chat_template" not in info
    again = _scores(load_reranker(saved, device="cpu"))
    torch.testing.assert_close(torch.tensor(again), torch.tensor(expected), atol=1e-5, rtol=0)


def test_an_embedded_gguf_without_the_gguf_package_names_the_extra(
    embedded_tiny: str, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # not installed
    with pytest.raises(MissingExtra, match=r"^model\.name_or_path: embedded:tiny-test needs the "):
        LlmReranker(reranker_config(Path(embedded_tiny)))  # type: ignore[arg-type]


def test_chat_template_truncation_keeps_the_answer_suffix(tiny_qwen: Path) -> None:
    config = reranker_config(
        tiny_qwen, query_max_length=32, document_max_length=24, llm_reranker={"chat_template": True}
    )
    model = LlmReranker(config)
    long_query = " ".join(["effects of caffeine on sleep"] * 30)
    long_passage = " ".join(["caffeine blocks adenosine receptors in the brain"] * 30)
    ids = model.tokenize_pairs([long_query], [long_passage]).ids.tolist()
    short = model.tokenize_pairs(["q"], ["p"]).ids.tolist()
    assert len(ids) == len(short) - 2 + 32 + 24  # one byte token each -> each text at its limit
    text = model.tokenizer.decode(ids)
    assert text.endswith(SUFFIX)  # the question and the template's suffix whole
    assert f"Query: {long_query[:32]}\nPassage: {long_passage[:24]}\nDoes" in text  # both cut
    assert len(ids) <= model.max_length


def test_a_chat_template_the_tokenizer_lacks_is_a_config_error(tmp_path: Path) -> None:
    folder = make_tiny_lm(tmp_path / "llama", "llama")  # its tokenizer has no chat template
    with pytest.raises(ConfigError, match=r"model\.llm_reranker\.chat_template: .*no chat"):
        LlmReranker(reranker_config(folder, llm_reranker={"chat_template": True}))


def test_saving_a_lora_reranker_on_a_gguf_warns_of_no_missing_config(
    embedded_tiny: str, tmp_path: Path
) -> None:
    """The adapter of a GGUF-loaded LM saves without peft's "Could not find a config file"
    warning (its base is a file, not a folder; no embedding is trained or resized)."""
    model = LlmReranker(reranker_config(Path(embedded_tiny), lora=True))  # type: ignore[arg-type]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        saved = model.save(tmp_path / "saved")
    assert not [w for w in caught if "config file" in str(w.message)], [
        str(w.message) for w in caught
    ]
    adapter = load_file(saved / ADAPTER_DIR / "adapter_model.safetensors")
    assert adapter and all("lora_" in name for name in adapter)  # the adapters only
