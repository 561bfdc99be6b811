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


__all__ = ["token_ids"]
