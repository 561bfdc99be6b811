"""Configuration of a model: backbone, pooling, text shaping, interaction, LoRA (strict)."""

from __future__ import annotations

from collections.abc import Collection
from string import Formatter
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from dualview.config import StrictModel

Pooling = Literal["cls", "mean", "last_token"]
Interaction = Literal["concat", "cross_attention", "instruction_attention"]
#: What is trained: a registered model kind, built in ``bi_encoder`` (embeddings),
#: ``cross_encoder`` and ``llm_reranker`` (`dualview.models.reranker`); a training config
#: checks it against the model families (`dualview.train.families.FAMILIES`), which code
#: outside the package can extend.
ModelKind = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
DECODER_LINEAR_LAYERS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)


#: The fields of a query template (``model.query_template``, eval's ``--query-template``).
QUERY_TEMPLATE_FIELDS = ("query", "instruction")
#: The fields of an LLM reranker's prompt (``model.llm_reranker.prompt``).
PROMPT_FIELDS = ("query", "passage")


def _field_text(name: str, spec: str | None, conversion: str | None) -> str:
    """A replacement field as written: ``{name!conversion:spec}``."""
    return (
        "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
    )


def template_fields(template: str, allowed: Collection[str]) -> list[str]:
    """The replacement fields of a ``str.format`` template, in order. Each must be a plain
    ``{name}`` with a name of ``allowed``: a conversion (``{query!r}``), a format spec
    (``{query:>9}``), an attribute or index (``{query.x}``, ``{query[0]}``), a positional
    ``{}`` or another name is a ValueError (pydantic words it as the field's error)."""
    try:
        parsed = list(Formatter().parse(template))
    except ValueError as exc:  # an unmatched brace; ``{{`` and ``}}`` are literal braces
        raise ValueError(f"not a valid template: {exc} (a literal brace is {{{{ or }}}})") from None
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if conversion or spec or name not in allowed:
            plain = " and ".join("{" + field + "}" for field in allowed)
            field = _field_text(name, spec, conversion)
            raise ValueError(f"{field}: only the plain fields {plain} are allowed")
        names.append(name)
    return names


def check_query_template(template: str) -> str:
    """``template`` when it is a valid query template (see `template_fields`)."""
    template_fields(template, QUERY_TEMPLATE_FIELDS)
    return template


#: A query template, checked where the config is read.
QueryTemplate = Annotated[str, AfterValidator(check_query_template)]


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


#: The default prompt of an LLM reranker: its score is read at the position after "Answer:".
LLM_RERANKER_PROMPT = (
    "Judge whether the passage meets the search query and the instruction that comes with it.\n"
    "Query: {query}\n"
    "Passage: {passage}\n"
    "Does the passage meet the query and its instruction? Answer true or false.\n"
    "Answer:"
)


class LlmRerankerSettings(StrictModel):
    """The prompt and answer words of an LLM reranker (`dualview.models.llm_reranker`)."""

    # ``{query}``: the query joined with its instruction (``model.query_template``);
    # ``{passage}``: the passage. The model reads the next token after the prompt's end.
    prompt: str = LLM_RERANKER_PROMPT
    # The relevant and the irrelevant answer; each must be one token of the tokenizer.
    answers: tuple[str, str] = ("true", "false")
    # Send the prompt as the user turn of the tokenizer's chat template (with the assistant's
    # turn opened), as an instruct model expects; null: on for the embedded GGUF models
    # (``embedded:qwen2.5-coder-0.5b``, ``embedded:qwen2.5-coder-1.5b``), off otherwise.
    chat_template: bool | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt_fields(cls, prompt: str) -> str:
        fields = template_fields(prompt, PROMPT_FIELDS)
        if sorted(fields) != ["passage", "query"]:
            raise ValueError(
                f"needs {{query}} and {{passage}} once each and no other field, found {fields}"
            )
        return prompt

    @field_validator("answers")
    @classmethod
    def _distinct_answers(cls, answers: tuple[str, str]) -> tuple[str, str]:
        if answers[0] == answers[1] or not all(answer.strip() for answer in answers):
            raise ValueError(f"two different non-blank answer words expected, got {answers}")
        return answers


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
    query_template: QueryTemplate = "{query} {instruction}"
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
    # Prompt and answer words of an LLM reranker (kind llm_reranker; None: the defaults).
    llm_reranker: LlmRerankerSettings | None = None
