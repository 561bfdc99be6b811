"""LLM rerankers: a causal LM that answers "true" or "false" to a relevance question.

The model reads one prompt per (query, instruction, passage) triple
(``model.llm_reranker.prompt``, with ``{query}``: the query joined with its instruction
through ``model.query_template``, and ``{passage}``), and its relevance score is the
log-odds of the relevant answer token against the irrelevant one at the position after the
prompt, as FollowIR-7B and Rank1 score relevance:

    score = logit(true) - logit(false) = log p(true) - log p(false)

where ``p`` is the two-way softmax over the two answer tokens (the log of the full softmax's
normaliser cancels in the difference). Training a listwise or pairwise loss on this score
trains the LM to answer the question.

- **Backbone**: a folder or Hub name, or an embedded GGUF by name (``embedded:qwen2.5-coder-0.5b``,
  ``embedded:qwen2.5-coder-1.5b``; `dualview.models.gguf`), assembled into the cache and
  loaded by transformers dequantized (``from_pretrained(folder, gguf_file=...)``, float32).
- **Chat template** (``model.llm_reranker.chat_template``; default on for the embedded GGUFs):
  the prompt is the user turn of the tokenizer's chat template, with the assistant's turn
  opened, so the answer position is the assistant's first token.
- **Answer tokens** (``model.llm_reranker.answers``, default ``true``/``false``): each word
  must be one token of the tokenizer (encoded without special tokens); for byte-level BPE
  tokenizers (Qwen, Llama 3) a word with a leading space (``" true"``) is the token that
  naturally follows ``Answer:``.
- **Truncation** cuts the query text and the passage to their own token limits
  (``model.query_max_length``, ``model.document_max_length``) before they go into the prompt
  (`PromptPieces`: the rendered prompt, chat template included, split around the two texts),
  so the question at the prompt's end, the template's suffix, and with them the answer
  position, are never cut.
- **Half precision** (bf16/fp16 weights, e.g. ``dualview eval --reranker-precision bf16``,
  or autocast): the two answer logits are computed in float32 from the decoder's last
  hidden state (`float32_answer_head`), so scores keep their resolution.
- **Left padding.** Every padded row ends at the last column, the answer position; position
  ids count real tokens only, so a pair's score does not depend on its batch.
- **Scoring** (`LlmReranker.score`): the prompts of one query text (its candidate
  passages) begin alike (the template's head and the query), so their common token prefix
  runs once per query; then the rests of all prompts run in chunks sorted by length across
  queries, each row on its own query's key/value cache (`stack_caches`). Scores are the
  whole prompts' (float rounding aside).
- **LoRA** (``model.lora``): the adapters of `dualview.models.decoder` on the LM's linear
  layers; only they train.
- **Saved folder**: the merged LM with its tokenizer (a plain ``AutoModelForCausalLM``
  folder: ``Qwen2ForCausalLM``, ``LlamaForCausalLM``, ... as vLLM and mteb take it), the
  adapter alone under ``lora_adapter/`` with LoRA, `dualview.models.reranker.RERANKER_FILE`
  holding the rendered prompt (chat template applied), the answers and the lengths, which
  `dualview.models.reranker.load_reranker` reads back, and `PROMPT_FILE`, the rendered prompt
  alone. The same folder is a sentence-transformers ``CrossEncoder`` (`write_cross_encoder_files`):
  the tokenizer's chat template is the scoring template (`PromptPieces.jinja`: a pair's
  ``query`` and ``document`` messages rendered into the prompt) and a ``LogitScore`` module
  reads the answer log-odds, so ``CrossEncoder(folder).predict([(query_text, passage)])``
  gives `LlmReranker.score`'s scores for pairs within the length limits (``query_text``: the
  query joined with its instruction; beyond the limits sentence-transformers cuts the
  rendered prompt, keeping its suffix, where this class cuts each text).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from torch import nn
from torch.nn import functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from dualview.config import validate_config
from dualview.data.formats.common import join_query_instruction
from dualview.errors import ConfigError
from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_json_file
from dualview.io.folder import atomic_dir
from dualview.models.config import LlmRerankerSettings, ModelConfig
from dualview.models.decoder import add_lora, ensure_pad_token, export_backbone, save_adapter
from dualview.models.fingerprint import update_with_weights
from dualview.models.gguf import EMBEDDED_GGUFS, embedded_gguf_path
from dualview.models.kinds import LOAD_RERANKER_USAGE, CardFacts, SavedKind
from dualview.models.pretrained import from_pretrained, load_complete
from dualview.models.reranker import RERANKER_FILE
from dualview.models.thread_tokenizer import ThreadTokenizers
from dualview.models.token_ids import token_ids
from dualview.models.tokens import PAD_MULTIPLE, TokenizedTexts, plan_chunks
from dualview.resources import optional_import

KIND = "llm_reranker"
#: No prompt is cut after its pieces are (see the module docstring): no limit on the whole.
_NO_LIMIT = 1 << 30
#: Shortest token prefix that prompts of one query share in scoring (`LlmReranker.score`):
#: below it, running the prefix alone and copying its cache per chunk gains nothing.
_MIN_SHARED_PREFIX = 16
#: Config fields of LMs whose logits are transformed after the output projection.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")
#: The name of a causal LM's key/value cache, in its forward's arguments and its output
#: (transformers renamed ``past_key_values`` to ``cache`` in 5.x).
_CACHE_ARG = (
    "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
)
#: Stand-ins for the two texts while the prompt is rendered (private-use characters).
_QUERY_MARK, _PASSAGE_MARK = "\ue000query\ue000", "\ue000passage\ue000"
#: The rendered prompt of a saved folder, ``{query}`` and ``{passage}`` its fields (for
#: clients that build the prompt themselves: vLLM's /v1/completions, mteb's rerankers).
PROMPT_FILE = "reranker_prompt.txt"
#: The sentence-transformers modules of a saved folder (the layout of sentence-transformers
#: 6: a causal-LM Transformer at the root, then LogitScore; see write_cross_encoder_files).
_ST_MODULES = (
    ("", "sentence_transformers.base.modules.transformer.Transformer"),
    ("1_LogitScore", "sentence_transformers.cross_encoder.modules.logit_score.LogitScore"),
)


def backbone_source(name: str) -> tuple[str, str | None]:
    """Where transformers finds ``name``: an embedded GGUF (`dualview.models.gguf`) is its
    cache folder and file (assembled on first use; transformers reads it with the ``gguf``
    package of the ``models`` extra); other names pass through."""
    if name not in EMBEDDED_GGUFS:
        return name, None
    optional_import("gguf", f"model.name_or_path: {name}")
    path = embedded_gguf_path(name)
    return str(path.parent), path.name


def _load_backbone(load: Any, source: str, gguf_file: str | None, **kwargs: Any) -> Any:
    """The causal LM at ``source``; from a GGUF file, dequantized into a plain dense model
    (transformers 5 keeps GGUF weights packed unless asked, and such a model can neither
    take LoRA nor be saved; 4.x always dequantizes)."""
    gguf_config = getattr(transformers, "GgufConfig", None)
    if gguf_file is not None:
        kwargs["gguf_file"] = gguf_file
        if gguf_config is not None:
            kwargs["quantization_config"] = gguf_config(dequantize=True)
    model = load(AutoModelForCausalLM.from_pretrained, source, **kwargs)
    quantizer = getattr(model, "hf_quantizer", None)
    if gguf_file is not None and quantizer is not None:
        quantizer.remove_quantization_config(model)  # dense weights: saved as any other LM
    return model


@dataclass(frozen=True)
class PromptPieces:
    """The rendered prompt (chat template applied or not) split around its two texts:
    literal pieces and the markers ``query`` / ``passage``, in prompt order."""

    pieces: tuple[str, ...]

    @classmethod
    def build(cls, prompt: str, tokenizer: Any, chat: bool) -> PromptPieces:
        """Render ``prompt`` (through ``tokenizer``'s chat template when ``chat``) and split it."""
        text = prompt.format(query=_QUERY_MARK, passage=_PASSAGE_MARK)
        if chat:
            text = _chat_text(tokenizer, text)
        pieces = re.split(f"({_QUERY_MARK}|{_PASSAGE_MARK})", text)
        if sorted(pieces[1::2]) != sorted([_QUERY_MARK, _PASSAGE_MARK]):
            raise ConfigError(
                "model.llm_reranker.chat_template: the tokenizer's chat template does not keep "
                "the prompt's query and passage once each"
            )
        marks = {_QUERY_MARK: "query", _PASSAGE_MARK: "passage"}
        return cls(
            tuple(marks.get(piece, piece) if i % 2 else piece for i, piece in enumerate(pieces))
        )

    def render(self, query: str, passage: str) -> str:
        """The prompt of one pair."""
        texts = {"query": query, "passage": passage}
        return "".join(texts[piece] if i % 2 else piece for i, piece in enumerate(self.pieces))

    def format_string(self) -> str:
        """The rendered prompt as a ``str.format`` template with ``{query}`` and ``{passage}``
        (the configured prompt itself when no chat template is applied)."""
        return "".join(
            f"{{{piece}}}" if i % 2 else piece.replace("{", "{{").replace("}", "}}")
            for i, piece in enumerate(self.pieces)
        )

    def jinja(self, head: str = "", tail: str = "") -> str:
        """A chat template rendering the ``query`` and ``document`` messages of a pair into
        the prompt (as sentence-transformers and vLLM's /v1/score present a pair), between
        ``head`` and ``tail``: the special tokens the tokenizer adds itself, which a chat
        template's tokenization does not add."""
        roles = {"query": "ns.query", "passage": "ns.document"}
        body = "".join(
            f"{{{{ {roles[piece]} }}}}" if i % 2 else _jinja_literal(piece)
            for i, piece in enumerate(
                (head + self.pieces[0], *self.pieces[1:-1], self.pieces[-1] + tail)
            )
        )
        return (
            "{%- set ns = namespace(query='', document='') -%}"
            "{%- for m in messages -%}"
            "{%- set text = m['content'] if m['content'] is string "
            "else m['content'] | map(attribute='text') | join('') -%}"
            "{%- if m['role'] == 'query' -%}{%- set ns.query = text -%}"
            "{%- elif m['role'] == 'document' -%}{%- set ns.document = text -%}{%- endif -%}"
            "{%- endfor -%}" + body
        )


def _jinja_literal(text: str) -> str:
    """``text`` as a Jinja expression printing it exactly (an expression, not a raw block:
    chat templates trim the newline after a block tag)."""
    escaped = "".join(
        char if " " <= char <= "~" and char not in '"\\' else f"\\U{ord(char):08x}" for char in text
    )
    return f'{{{{ "{escaped}" }}}}' if text else ""


def _chat_text(tokenizer: Any, content: str) -> str:
    """``content`` as the user turn of ``tokenizer``'s chat template, the assistant's turn
    opened; without a leading BOS the tokenizer adds itself (it would be there twice)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"model.llm_reranker.chat_template: {type(tokenizer).__name__} of this model has "
            "no chat template; set it to false"
        )
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    bos = tokenizer.bos_token
    adds_bos = bos is not None and tokenizer("", add_special_tokens=True)["input_ids"][:1] == [
        tokenizer.bos_token_id
    ]
    return text[len(bos) :] if adds_bos and text.startswith(bos) else text


def _check_supported(config: ModelConfig) -> None:
    """Options of `ModelConfig` that an LLM reranker does not have."""
    if config.interaction != "concat":
        raise ConfigError("model.interaction: an llm_reranker reads the joined text (concat)")
    if config.unpadded:
        raise ConfigError("model.unpadded: not supported for an llm_reranker")


def answer_token_ids(tokenizer: Any, answers: Sequence[str]) -> tuple[int, int]:
    """The token ids of the relevant and the irrelevant answer word; each must be one token."""
    ids = []
    for word in answers:
        pieces = tokenizer(word, add_special_tokens=False)["input_ids"]
        unknown = tokenizer.unk_token_id is not None and pieces == [tokenizer.unk_token_id]
        if len(pieces) != 1 or unknown:
            shown = tokenizer.convert_ids_to_tokens(pieces)
            raise ConfigError(
                f"model.llm_reranker.answers: {word!r} is not one known token of "
                f"{type(tokenizer).__name__} (it encodes as {shown}); choose a word that is "
                "one token (byte-level BPE tokenizers often want a leading space: ' true')"
            )
        ids.append(int(pieces[0]))
    if ids[0] == ids[1]:
        raise ConfigError(f"model.llm_reranker.answers: {list(answers)} are the same token")
    return ids[0], ids[1]


def answer_log_odds(
    backbone: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    answer_ids: tuple[int, int],
    past_key_values: Any = None,
) -> torch.Tensor:
    """The log-odds [n] (float32) of the first answer token against the second at the last
    position of left-padded prompts, ``logit(a) - logit(b) = log p(a) - log p(b)``, as the
    module docstring says; one forward pass of the causal LM ``backbone``, no generation.
    Position ids count real tokens only, so a prompt's score does not depend on its batch.
    The LLM reranker's score and the synthesis judge's (`verify.scoring: logodds`).

    ``past_key_values``: a cache of a prefix that every row continues (`prefix_cache`, one
    row per prompt); ``attention_mask`` then covers the prefix's columns, then
    ``input_ids``' (the rest of each prompt, left-padded)."""
    past = 0 if past_key_values is None else int(past_key_values.get_seq_length())
    if attention_mask.shape[-1] != past + input_ids.shape[-1]:
        raise ValueError(
            f"answer_log_odds: attention_mask has {attention_mask.shape[-1]} columns, expected "
            f"{past} cached + {input_ids.shape[-1]} new"
        )
    if input_ids.shape[0] and not bool(attention_mask[:, -1].all()):
        raise ValueError("answer_log_odds: prompts must be left-padded (see LlmReranker.pad)")
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]
    extra = {} if past_key_values is None else {_CACHE_ARG: past_key_values}
    inputs = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": positions,
        "use_cache": past_key_values is not None,
        **extra,
    }
    head = float32_answer_head(backbone, input_ids.device)
    if head is not None:
        decoder, rows = head
        hidden = decoder(**inputs).last_hidden_state[:, -1]
        with torch.autocast(input_ids.device.type, enabled=False):
            logits = hidden.float() @ rows[list(answer_ids)].float().T
        return logits[:, 0] - logits[:, 1]
    logits = backbone(**inputs, logits_to_keep=1).logits[:, -1].float()
    first, second = answer_ids
    return logits[:, first] - logits[:, second]


def float32_answer_head(backbone: Any, device: torch.device) -> tuple[Any, torch.Tensor] | None:
    """The decoder and the output embedding rows of ``backbone`` when its logits would be
    computed in half precision (half weights, or autocast on), so that `answer_log_odds`
    reads the two answer logits in float32 off the decoder's last hidden state: a bf16 logit
    near 20 moves in steps of 0.125, which ties most of a query's candidates. None (the LM's
    own logits) for float32 LMs, and for LMs whose head is not a plain bias-free projection
    of that state (a softcap or a logit scale after it)."""
    weight = backbone.get_input_embeddings().weight
    half = weight.dtype in (torch.float16, torch.bfloat16)
    if not half and not torch.is_autocast_enabled(device.type):
        return None
    config = getattr(backbone, "config", None)
    if any(getattr(config, name, None) for name in _LOGIT_TRANSFORMS):
        return None
    head = backbone.get_output_embeddings()
    decoder = backbone.get_decoder() if hasattr(backbone, "get_decoder") else None
    plain = isinstance(head, nn.Linear) and head.bias is None
    if decoder is None or decoder is backbone or not plain:
        return None
    return decoder, head.weight


def prefix_cache(backbone: Any, prefix_ids: torch.Tensor) -> Any:
    """The key/value cache of one unpadded token prefix [p] through the causal LM
    ``backbone`` (one row; `stack_caches` puts the caches of several prompts' prefixes together)."""
    ids = prefix_ids.to(torch.int64).unsqueeze(0)
    positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
    out = backbone(input_ids=ids, position_ids=positions, use_cache=True, logits_to_keep=1)
    return getattr(out, _CACHE_ARG)


def stack_caches(caches: Sequence[Any], lengths: Sequence[int]) -> tuple[Any, torch.Tensor]:
    """One cache whose row ``i`` is the one-row ``caches[i]`` (a prefix of ``lengths[i]``
    tokens, `prefix_cache`), left-padded to the longest, and the mask of its columns
    [len(caches), longest] (padding 0), which `answer_log_odds`'s ``attention_mask`` begins
    with; the padded columns are masked, and positions count real tokens only."""
    width = max(lengths)
    layers = []
    for per_layer in zip(*(list(cache) for cache in caches), strict=True):
        pairs = list(zip(per_layer, lengths, strict=True))
        keys, values = (
            torch.cat([F.pad(layer[part], (0, 0, width - n, 0)) for layer, n in pairs])
            for part in (0, 1)
        )
        layers.append((keys, values))
    from_legacy = getattr(DynamicCache, "from_legacy_cache", None)  # transformers 4.x
    cache = from_legacy(tuple(layers)) if from_legacy is not None else DynamicCache(layers)
    columns = torch.arange(width).unsqueeze(0)
    mask = columns >= (width - torch.tensor(list(lengths))).unsqueeze(1)
    return cache, mask.to(torch.int64)


def shared_prefixes(
    keys: Sequence[str], tokens: TokenizedTexts, min_length: int = 1
) -> tuple[list[tuple[list[int], int]], list[int]]:
    """Prompts that share a token prefix: the indices of each group of two or more prompts
    with the same ``keys[i]`` (their query text) with the length of the group's common
    token prefix, one token short of its shortest prompt at most (the answer position is
    always read in a forward pass); groups whose prefix is under ``min_length`` tokens and
    prompts alone, as leftover indices (in order)."""
    by_key: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        by_key.setdefault(key, []).append(index)
    ids, offsets, lengths = tokens.ids, tokens.offsets.tolist(), tokens.lengths.tolist()
    groups: list[tuple[list[int], int]] = []
    rest: list[int] = []
    for members in by_key.values():
        common = min(lengths[i] for i in members) - 1
        first = ids[offsets[members[0]] : offsets[members[0]] + common]
        for i in members[1:]:
            if common < min_length:
                break
            same = ids[offsets[i] : offsets[i] + common] == first[:common]
            differ = (~same).nonzero()
            common = int(differ[0]) if len(differ) else common
        if len(members) > 1 and common >= min_length:
            groups.append((members, common))
        else:
            rest.extend(members)
    return groups, sorted(rest)


def _rests(
    tokens: TokenizedTexts, indices: Sequence[int], starts: Sequence[int]
) -> list[list[int]]:
    """The token ids of each ``tokens[indices[k]]`` from position ``starts[k]`` on."""
    offsets, lengths = tokens.offsets.tolist(), tokens.lengths.tolist()
    return [
        tokens.ids[offsets[i] + start : offsets[i] + lengths[i]].tolist()
        for i, start in zip(indices, starts, strict=True)
    ]


class LlmReranker(nn.Module):
    """A causal LM scoring relevance as answer log-odds; see the module docstring."""

    def __init__(self, config: ModelConfig, complete: bool = False) -> None:
        """``complete``: the folder is a saved LLM reranker, so every weight must be in it
        (another kind's folder is an error, not a model with new random weights)."""
        super().__init__()
        _check_supported(config)
        self.config = config
        self.settings = config.llm_reranker or LlmRerankerSettings()
        name, remote = config.name_or_path, config.trust_remote_code
        kwargs: dict[str, Any] = {"trust_remote_code": remote}
        if config.attn_implementation is not None:
            kwargs["attn_implementation"] = config.attn_implementation
        load = load_complete if complete else from_pretrained
        source, gguf_file = backbone_source(name)
        self.backbone = _load_backbone(load, source, gguf_file, **kwargs)
        gguf = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = from_pretrained(
            AutoTokenizer.from_pretrained, source, trust_remote_code=remote, **gguf
        )
        ensure_pad_token(self.tokenizer)
        self.tokenizer.padding_side = "left"
        self.answer_ids = answer_token_ids(self.tokenizer, self.settings.answers)
        chat = self.settings.chat_template
        self.chat_template = name in EMBEDDED_GGUFS if chat is None else chat
        self.prompt = PromptPieces.build(self.settings.prompt, self.tokenizer, self.chat_template)
        if config.lora is not None:
            self.backbone = add_lora(self.backbone, config.lora)
        self._tokenizers = ThreadTokenizers(self.tokenizer)  # one per loader thread
        #: Longest prompt: both texts at their limits plus the template's own tokens.
        self.max_length = config.query_max_length + config.document_max_length
        self.max_length += len(self.tokenize_pairs([""], [""]).ids)
        self._fingerprint: str | None = None

    # -- training (TrainableReranker) -------------------------------------------------------

    def _tokenizer(self) -> Any:
        """This thread's tokenizer (a fast tokenizer keeps its truncation as state)."""
        return self._tokenizers.get()

    def tokenize_pairs(self, query_texts: Sequence[str], passages: Sequence[str]) -> TokenizedTexts:
        """Unpadded token ids of each pair's prompt (query text and passage cut to their limits);
        safe to call from several threads."""
        if len(query_texts) != len(passages):
            raise ValueError(f"{len(query_texts)} query texts but {len(passages)} passages")
        queries = self._clip(query_texts, self.config.query_max_length)
        docs = self._clip(passages, self.config.document_max_length)
        prompts = [self.prompt.render(query, doc) for query, doc in zip(queries, docs, strict=True)]
        if not prompts:
            return TokenizedTexts.from_lists([])
        return TokenizedTexts.from_lists(token_ids(self._tokenizer(), prompts, _NO_LIMIT))

    def _clip(self, texts: Sequence[str], limit: int) -> list[str]:
        """``texts`` cut to at most ``limit`` tokens each (decoded back to text when cut)."""
        texts = list(texts)
        if not texts:
            return []
        tokenizer = self._tokenizer()
        ids = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=limit + 1)
        return [
            tokenizer.decode(pieces[:limit], skip_special_tokens=True)
            if len(pieces) > limit
            else text
            for text, pieces in zip(texts, ids["input_ids"], strict=True)
        ]

    def pad_pairs(
        self,
        tokens: TokenizedTexts,
        indices: Sequence[int] | torch.Tensor,
        multiple: int = PAD_MULTIPLE,
    ) -> dict[str, torch.Tensor]:
        """Left-padded ``input_ids`` and ``attention_mask`` of ``tokens[indices]``, on device
        (width: the longest rounded up to ``multiple``)."""
        pad_id = int(self.tokenizer.pad_token_id)
        inputs = tokens.pad(indices, pad_id=pad_id, left=True, multiple=multiple)
        device = self.device
        return {key: value.to(device, non_blocking=True) for key, value in inputs.items()}

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Relevance logits [n] (float32) of left-padded prompts, with gradients."""
        return answer_log_odds(self.backbone, input_ids, attention_mask, self.answer_ids)

    def train(self, mode: bool = True) -> LlmReranker:
        if mode != self.training:
            self._fingerprint = None  # the weights may have changed in training mode
        return super().train(mode)

    # -- evaluation (Reranker) -----------------------------------------------------------------

    def query_texts(self, queries: Sequence[str], instructions: Sequence[str]) -> list[str]:
        """Each query joined with its instruction through ``model.query_template``."""
        template = self.config.query_template
        return [
            join_query_instruction(query, instruction, template)
            for query, instruction in zip(queries, instructions, strict=True)
        ]

    def score(
        self,
        queries: Sequence[str],
        instructions: Sequence[str],
        passages: Sequence[str],
        batch_size: int = 32,
    ) -> np.ndarray:
        """Relevance of ``passages[i]`` to ``queries[i]`` under ``instructions[i]``, float32 [n].

        Prompts are scored in chunks of at most ``batch_size`` of similar length, longest
        first, in eval mode and without autograd. Prompts of the same query text (a query's
        candidate passages) share their token prefix (the template's head and the query):
        it is run once, and the rests of the prompts run in chunks sorted by length across
        queries, each row on its query's key/value cache. The scores are those of whole
        prompts (up to float rounding: `answer_log_odds` on each prompt alone gives them
        within 1e-5 in float32).
        Chunks are padded to their longest prompt (to a multiple of 8 on CUDA).
        """
        if not len(queries) == len(instructions) == len(passages):
            raise ValueError(
                f"score: {len(queries)} queries, {len(instructions)} instructions and "
                f"{len(passages)} passages; one of each per pair expected"
            )
        query_texts = self.query_texts(queries, instructions)
        tokens = self.tokenize_pairs(query_texts, passages)
        scores = np.empty(len(tokens), dtype=np.float32)
        multiple = PAD_MULTIPLE if self.device.type == "cuda" else 1
        groups, rest = shared_prefixes(query_texts, tokens, min_length=_MIN_SHARED_PREFIX)
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                self._score_continuations(tokens, groups, batch_size, multiple, scores)
                lone = tokens.lengths[rest]  # prompts sharing no prefix: scored whole
                for chunk in plan_chunks(lone, max_items=max(1, batch_size)):
                    indices = [rest[i] for i in chunk]
                    inputs = self.pad_pairs(tokens, indices, multiple)
                    scores[indices] = self(**inputs).cpu().numpy()
        finally:
            self.train(was_training)
        return scores

    def _score_continuations(
        self,
        tokens: TokenizedTexts,
        groups: list[tuple[list[int], int]],
        batch_size: int,
        multiple: int,
        scores: np.ndarray,
    ) -> None:
        """Scores (into ``scores``) of the prompts of ``groups`` (`shared_prefixes`): each
        group's common prefix runs once; then the rests of all their prompts, sorted by
        length across groups, run in chunks, each row on its own group's cache."""
        caches, members, owner, starts = [], [], [], []
        for number, (indices, length) in enumerate(groups):
            offset = int(tokens.offsets[indices[0]])
            ids = tokens.ids[offset : offset + length].to(self.device)
            caches.append(prefix_cache(self.backbone, ids))
            members += indices
            owner += [number] * len(indices)
            starts += [length] * len(indices)
        rests = TokenizedTexts.from_lists(_rests(tokens, members, starts))
        for chunk in plan_chunks(rests.lengths, max_items=max(1, batch_size)):
            lengths = [starts[i] for i in chunk]
            past, head = stack_caches([caches[owner[i]] for i in chunk], lengths)
            inputs = self.pad_pairs(rests, chunk, multiple)
            mask = torch.cat([head.to(self.device), inputs["attention_mask"]], dim=1)
            log_odds = answer_log_odds(
                self.backbone, inputs["input_ids"], mask, self.answer_ids, past_key_values=past
            )
            scores[[members[i] for i in chunk]] = log_odds.cpu().numpy()

    @property
    def fingerprint(self) -> str:
        """Hash of the weights (with their dtypes), prompt, answers, template and lengths.

        Kept while the model stays in eval mode; hashing costs about a second per GB.
        """
        if self._fingerprint is not None and not self.training:
            return self._fingerprint
        digest = hashlib.sha256(json.dumps(self.description(), sort_keys=True).encode())
        update_with_weights(digest, self.backbone)
        value = digest.hexdigest()[:24]
        if not self.training:
            self._fingerprint = value
        return value

    # -- saving ------------------------------------------------------------------------------------

    def description(self) -> dict[str, Any]:
        """What `RERANKER_FILE` holds: the kind and everything that shapes the prompt. The
        prompt is the rendered one (chat template applied), so a saved folder needs no chat
        template to score, and a prompt without one reads as it always did (same
        fingerprints)."""
        cfg = self.config
        return {
            "kind": KIND,
            "prompt": self.prompt.format_string(),
            "answers": list(self.settings.answers),
            "answer_token_ids": list(self.answer_ids),
            "query_template": cfg.query_template,
            "query_max_length": cfg.query_max_length,
            "document_max_length": cfg.document_max_length,
            "trust_remote_code": cfg.trust_remote_code,
        }

    def save(self, folder: str | Path) -> Path:
        """Write the merged LM, its tokenizer (its chat template: the scoring template), the
        LoRA adapter, `RERANKER_FILE`, `PROMPT_FILE` and the sentence-transformers files."""
        folder = Path(folder)
        with atomic_dir(folder) as out:  # the previous folder stays whole until this one is
            export_backbone(self.backbone).save_pretrained(out)  # LoRA: a merged copy
            self._save_tokenizer(out)
            save_adapter(self.backbone, out)
            atomic_write_text(out / RERANKER_FILE, json.dumps(self.description(), indent=2))
            atomic_write_text(out / PROMPT_FILE, self.prompt.format_string())
            write_cross_encoder_files(out, self.answer_ids)
        return folder

    def _save_tokenizer(self, out: Path) -> None:
        """The tokenizer, saved with `PromptPieces.jinja` as its chat template."""
        tokenizer, original = self.tokenizer, self.tokenizer.chat_template
        tokenizer.chat_template = self.prompt.jinja(*_added_special_text(tokenizer))
        try:
            tokenizer.save_pretrained(out)
        finally:
            tokenizer.chat_template = original


def _added_special_text(tokenizer: Any) -> tuple[str, str]:
    """The text of the special tokens ``tokenizer`` adds before and after a text itself
    (Llama: ``<s>`` before; Qwen: none)."""
    plain = tokenizer(_QUERY_MARK, add_special_tokens=False)["input_ids"]
    full = tokenizer(_QUERY_MARK, add_special_tokens=True)["input_ids"]
    start = next(i for i in range(len(full)) if full[i : i + len(plain)] == plain)
    head, tail = full[:start], full[start + len(plain) :]
    return tokenizer.decode(head), tokenizer.decode(tail)


def write_cross_encoder_files(out: Path, answer_ids: tuple[int, int]) -> None:
    """The sentence-transformers files that make ``out`` (a causal LM folder whose chat
    template renders a pair) a ``CrossEncoder``: the LM's logits at the last position, then
    ``LogitScore`` (logit of the relevant minus the irrelevant answer), no activation."""
    modules = [
        {"idx": i, "name": str(i), "path": path, "type": kind}
        for i, (path, kind) in enumerate(_ST_MODULES)
    ]
    logits = {"method": "forward", "method_output_name": "logits"}
    transformer = {  # "message": pairs go through the chat template (the scoring template)
        "transformer_task": "text-generation",
        "modality_config": {"text": logits, "message": {**logits, "format": "flat"}},
        "module_output_name": "causal_logits",
    }
    score = {
        "true_token_id": answer_ids[0],
        "false_token_id": answer_ids[1],
        "module_input_name": "causal_logits",
    }
    model = {"model_type": "CrossEncoder", "activation_fn": "torch.nn.modules.linear.Identity"}
    files = {
        "modules.json": modules,
        "sentence_bert_config.json": transformer,
        f"{_ST_MODULES[1][0]}/config.json": score,
        "config_sentence_transformers.json": model,
    }
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / name, json.dumps(data, indent=2))


def load_llm_reranker(folder: Path, device: str | None = None) -> LlmReranker:
    """The reranker saved in ``folder`` by `LlmReranker.save`, in eval mode on ``device``."""
    path = Path(folder) / RERANKER_FILE
    info = read_json_file(path)
    fields = ("query_template", "query_max_length", "document_max_length", "trust_remote_code")
    data = {key: info[key] for key in fields if key in info}
    data.update(kind=KIND, name_or_path=str(folder))
    settings = ("prompt", "answers", "chat_template")
    data["llm_reranker"] = {key: info[key] for key in settings if key in info}
    model = LlmReranker(validate_config(ModelConfig, data, str(path)), complete=True)
    saved_ids = info.get("answer_token_ids")
    if saved_ids is not None and list(saved_ids) != list(model.answer_ids):
        raise ConfigError(
            f"{path}: field 'answer_token_ids': {saved_ids}, but the saved tokenizer gives "
            f"{list(model.answer_ids)} for {list(model.settings.answers)}"
        )
    target = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(target).eval()


def _card_lines(model: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    prompt = str(info.get("prompt", "-")).replace("\n", " / ")
    return [f"- Answers: {info.get('answers', '-')}; prompt: `{prompt}`"]


#: ``model.kind: llm_reranker`` (`dualview.models.kinds.MODEL_KINDS`).
SAVED_KIND = SavedKind(
    KIND,
    CardFacts(
        "An LLM reranker (a causal LM whose score is the log-odds of its two answer words "
        "after a relevance prompt; LoRA merged, adapter in `lora_adapter/`)",
        "text-ranking",
        ("reranker", "llm-reranker"),
        LOAD_RERANKER_USAGE,
        library="transformers",
    ),
    RERANKER_FILE,
    card_lines=_card_lines,
    build=LlmReranker,
    load=load_llm_reranker,
)
