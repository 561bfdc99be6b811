"""Configuration of a model: backbone, pooling, text shaping, interaction, LoRA (strict)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dualview.config import StrictModel

Pooling = Literal["cls", "mean", "last_token"]
Interaction = Literal["concat", "cross_attention", "instruction_attention"]
#: What is trained: a bi-encoder (embeddings) or a reranker (`dualview.models.reranker`).
ModelKind = Literal["bi_encoder", "cross_encoder", "llm_reranker"]
DECODER_LINEAR_LAYERS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)


class LoraSettings(StrictModel):
    """LoRA adapters (``peft``) on the backbone's linear layers; base weights stay frozen."""

    rank: int = Field(16, gt=0)
    alpha: float = Field(32.0, gt=0)  # updates scaled by alpha / rank
    dropout: float = Field(0.0, ge=0, lt=1)
    # Module names (suffixes) that get adapters: Llama's and Qwen2's attention and MLP.
    target_modules: list[str] = Field(
        default_factory=lambda: list(DECODER_LINEAR_LAYERS),
        min_length=1,
    )


class ModelConfig(StrictModel):
    """The model: its kind, backbone, pooling and text shaping."""

    # "bi_encoder" embeds queries and documents apart; "cross_encoder" and "llm_reranker"
    # read the query with its instruction and one passage together (dualview.models.reranker).
    kind: ModelKind = "bi_encoder"
    name_or_path: str = "embedded:minilm"
    pooling: Pooling = "mean"
    normalize: bool = True
    trust_remote_code: bool = False
    query_max_length: int = Field(512, gt=0)
    document_max_length: int = Field(512, gt=0)
    # How a query and its instruction are joined (the paper concatenates).
    query_template: str = "{query} {instruction}"
    # InF-Embed instruction-query interaction: "concat" encodes the template's joined text;
    # "cross_attention" encodes instruction and query apart and joins them with the
    # cross-attention head (dualview.models.interaction; query_template is then unused);
    # "instruction_attention" (ours, beyond the paper) adds to the concatenation embedding a
    # gated term in which the query's tokens read the instruction's tokens; the gate starts
    # at 0, so it starts as the concat model (dualview.models.instruction_attention).
    interaction: Interaction = "concat"
    # Attention kernel passed to transformers (None: its default, "sdpa" for most encoders;
    # "flash_attention_2" when the flash-attn package is installed).
    attn_implementation: str | None = None
    # Padding-free chunks: the texts of a chunk packed into one sequence, attention kept
    # within each text (dualview.models.unpadded; BERT/RoBERTa/XLM-R backbones).
    unpadded: bool = False
    # Decoder-only retrievers (dualview.models.decoder): append the tokenizer's EOS to every
    # text and pad on the left (None: when pooling is last_token and the tokenizer has an
    # EOS token; encoder tokenizers without one already end texts with [SEP] and pad right).
    append_eos: bool | None = None
    # LoRA adapters instead of full fine-tuning (None: all weights train).
    lora: LoraSettings | None = None
