"""Token ids of a batch of texts through the tokenizers backend, without character offsets.

Calling a Hugging Face fast tokenizer runs the Rust ``encode_batch``, which also tracks
every token's character offsets, and then converts each encoding's fields to Python lists.
Training needs the ids alone: ``encode_batch_fast`` (tokenizers >= 0.21) skips the offsets,
with the same ids (same normalizer, pre-tokenizer, model, truncation and special tokens).
On a paper-shape batch (992 documents of ~484 tokens) that took 1.24 CPU-s instead of 1.47
(``benchmarks/host_ceiling.py``, one run, best of 3). Tokenizers without it (slow ones,
older versions) go through the ordinary call.

The backend's truncation is set on every call (a fast tokenizer keeps it as state, which the
ordinary call also resets to what it needs): one tokenizer per thread, as for the ordinary
call (`dualview.train.loader.BatchTokenizer.copy`).
"""

from __future__ import annotations

from typing import Any


def token_ids(tokenizer: Any, texts: list[str], max_length: int) -> list[list[int]]:
    """Ids of ``texts`` with special tokens, truncated to ``max_length``, unpadded."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    fast = getattr(backend, "encode_batch_fast", None)
    if fast is None:
        encoded = tokenizer(
            texts,
            truncation=True,
            max_length=max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return encoded["input_ids"]
    backend.enable_truncation(
        max_length, strategy="longest_first", direction=tokenizer.truncation_side
    )
    backend.no_padding()
    return [encoding.ids for encoding in fast(texts, add_special_tokens=True)]


def pair_token_ids(
    tokenizer: Any, firsts: list[str], seconds: list[str], max_length: int
) -> tuple[list[list[int]], list[int]]:
    """Ids of each (first, second) text pair joined by the tokenizer's pair template
    (``[CLS] a [SEP] b [SEP]`` for BERT), truncated ``longest_first`` to ``max_length`` as a
    sentence-transformers ``CrossEncoder`` truncates; and the number of leading tokens of
    each pair whose token type is 0 (the first segment with its special tokens)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    fast = getattr(backend, "encode_batch_fast", None)
    if fast is None:
        encoded = tokenizer(
            firsts,
            seconds,
            truncation="longest_first",
            max_length=max_length,
            return_attention_mask=False,
            return_token_type_ids=True,
        )
        types = encoded["token_type_ids"]
        return encoded["input_ids"], [sum(1 for t in row if t == 0) for row in types]
    backend.enable_truncation(
        max_length, strategy="longest_first", direction=tokenizer.truncation_side
    )
    backend.no_padding()
    encodings = fast(list(zip(firsts, seconds, strict=True)), add_special_tokens=True)
    return [e.ids for e in encodings], [e.type_ids.count(0) for e in encodings]


__all__ = ["pair_token_ids", "token_ids"]
