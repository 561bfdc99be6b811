"""What the GPU benchmarks share: random-init backbones of the paper's shapes, synthetic text.

No weights travel: a backbone is built from a config with random weights (speed does not
depend on them) and saved with a tokenizer (the embedded MiniLM's, or any folder given with
``--tokenizer``) into a folder that ``AutoModel`` and ``SentenceTransformer`` load by path.

Texts are random words from the tokenizer's vocabulary with realistic lengths:

- ``msmarco``: passage lengths drawn from the word counts of the 1,743 MS MARCO passages in
  ``../shared/data/msmarco-1743`` (kept, lengths only, in ``benchmarks/data/msmarco_lengths.json``);
- ``long``: passages long enough to fill 512 tokens (truncated by the model).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LENGTHS_FILE = ROOT / "benchmarks" / "data" / "msmarco_lengths.json"
LONG_WORDS = (420, 560)  # random vocabulary words -> about 520-700 WordPiece tokens

#: Backbone shapes: the paper's two families and a tiny one for CPU smoke tests.
SHAPES: dict[str, dict[str, Any]] = {
    # bert-base / gte-multilingual-base class (110M)
    "bert-base": {
        "model_type": "bert",
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
    },
    # XLM-R-large / bge-m3 class (568M, 250k vocabulary)
    "xlmr-large": {
        "model_type": "xlm-roberta",
        "vocab_size": 250002,
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "max_position_embeddings": 514,
    },
    # Qwen2.5-0.5B class decoder (the embedded LLM reranker's shape, 494M; GQA, SwiGLU)
    "qwen2-0.5b": {
        "model_type": "qwen2",
        "causal": True,
        "hidden_size": 896,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "intermediate_size": 4864,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": True,
    },
    # CPU smoke tests
    "tiny-lm": {
        "model_type": "qwen2",
        "causal": True,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 128,
        "max_position_embeddings": 1024,
        "tie_word_embeddings": True,
    },
    "tiny": {
        "model_type": "bert",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "max_position_embeddings": 512,
    },
}


def tokenizer_folder(name: str) -> str:
    """A tokenizer folder: ``embedded:minilm`` (the installed package) or a path."""
    from dualview.resources import resolve_model_path

    return resolve_model_path(name)


def build_backbone(shape: str, tokenizer: str, out_dir: Path, seed: int = 0) -> Path:
    """Save a random-init backbone of ``shape`` with ``tokenizer`` into ``out_dir``."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_folder(tokenizer))
    spec = dict(SHAPES[shape])
    model_type = spec.pop("model_type")
    causal = spec.pop("causal", False)  # a decoder for the LLM reranker: LM head included
    spec.setdefault("vocab_size", len(tok))
    # XLM-R derives position ids from the pad id: make it the tokenizer's.
    config = AutoConfig.for_model(model_type, pad_token_id=tok.pad_token_id, **spec)
    torch.manual_seed(seed)
    model = (AutoModelForCausalLM if causal else AutoModel).from_config(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir


def passage_word_counts() -> list[int]:
    return json.loads(LENGTHS_FILE.read_text(encoding="utf-8"))["passage_words"]


def query_word_counts() -> list[int]:
    return json.loads(LENGTHS_FILE.read_text(encoding="utf-8"))["query_words"]


def vocabulary_words(tokenizer: str) -> list[str]:
    """Whole words of the tokenizer's vocabulary (no sub-word pieces, no special tokens)."""
    from transformers import AutoTokenizer

    vocab = AutoTokenizer.from_pretrained(tokenizer_folder(tokenizer)).get_vocab()
    words = sorted(w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2)
    return words or sorted(vocab)


def make_texts(words: list[str], n: int, kind: str, seed: int = 0) -> list[str]:
    """``n`` random passages of the ``kind`` length profile (``msmarco`` | ``long`` | ``query``)."""
    rng = random.Random(seed)
    if kind == "msmarco":
        counts = passage_word_counts()
        sizes = [rng.choice(counts) for _ in range(n)]
    elif kind == "query":
        counts = query_word_counts()
        sizes = [rng.choice(counts) for _ in range(n)]
    elif kind == "long":
        sizes = [rng.randint(*LONG_WORDS) for _ in range(n)]
    else:
        raise ValueError(f"unknown text kind {kind!r}")
    return [" ".join(rng.choices(words, k=max(size, 1))) for size in sizes]
