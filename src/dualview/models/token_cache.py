"""Token ids of a corpus, computed once and reused by every model with the same tokenizer.

A sweep evaluates the same corpora with dozens of models; many share a tokenizer (every
fine-tune of one base model, every shape built on one vocabulary), and on 512-token texts
the tokenizer, not the GPU, bounds encoding (``benchmarks/README.md``, ``host_ceiling.py``).
`TokenIdCache` stores the ids of a list of texts as one file:

``<root>/token_ids/<tokenizer fingerprint>-<max_length>/<corpus hash>.npz``

- the **tokenizer fingerprint** hashes what decides the ids: the tokenizers backend's full
  description (normalizer, pre-tokenizer, model and vocabulary, post-processor with its
  special tokens), without its truncation and padding state, which `token_ids` sets per call;
  and the truncation side. Two tokenizers with the same fingerprint give the same ids;
- the **corpus hash** hashes the texts in order (each with its length, so no two lists of
  texts collide by concatenation).

A cached file holds the flat ``int32`` ids and the ``int64`` lengths of `TokenizedTexts`.
A file that cannot be read is tokenized again and rewritten; a file that cannot be written
is reported once and the ids are returned anyway (the cache only saves time).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dualview.errors import warn_once
from dualview.models.tokens import TokenizedTexts, tokenize_texts
from dualview.resources import cache_dir

#: The folder under the cache root that holds the files.
FOLDER = "token_ids"


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A hash of everything that decides ``tokenizer``'s ids (see the module docstring)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        payload = json.dumps(spec, sort_keys=True)
    else:  # a slow tokenizer: its class and vocabulary
        payload = type(tokenizer).__name__ + json.dumps(sorted(tokenizer.get_vocab().items()))
    payload += f"\x00{getattr(tokenizer, 'truncation_side', 'right')}"
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def corpus_hash(texts: Sequence[str]) -> str:
    """A hash of ``texts`` in order."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:32]


class TokenIdCache:
    """Token ids of whole corpora on disk, shared by all models of one tokenizer."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_dir()) / FOLDER
        self.hits = 0
        self.misses = 0
        # fingerprints by tokenizer object (hashing a vocabulary takes ~0.1 s), with its
        # truncation side, which a caller may change
        self._fingerprints: dict[int, tuple[Any, str, str]] = {}

    def fingerprint(self, tokenizer: Any) -> str:
        """`tokenizer_fingerprint`, computed once per tokenizer object and truncation side."""
        side = getattr(tokenizer, "truncation_side", "right")
        known = self._fingerprints.get(id(tokenizer))
        if known is None or known[0] is not tokenizer or known[1] != side:
            known = (tokenizer, side, tokenizer_fingerprint(tokenizer))
            self._fingerprints[id(tokenizer)] = known
        return known[2]

    def path(self, tokenizer: Any, texts: Sequence[str], max_length: int) -> Path:
        """Where the ids of ``texts`` through ``tokenizer`` at ``max_length`` are kept."""
        folder = f"{self.fingerprint(tokenizer)}-{max_length}"
        return self.root / folder / f"{corpus_hash(texts)}.npz"

    def ids(self, tokenizer: Any, texts: Sequence[str], max_length: int) -> TokenizedTexts:
        """The ids of ``texts`` (special tokens added, truncated to ``max_length``, unpadded):
        read back when cached, else tokenized and stored."""
        path = self.path(tokenizer, texts, max_length)
        cached = _read(path, len(texts))
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        tokens = tokenize_texts(tokenizer, list(texts), max_length)
        _write(path, tokens)
        return tokens


def _read(path: Path, count: int) -> TokenizedTexts | None:
    if not path.exists():
        return None
    try:
        with np.load(path) as data:
            ids, lengths = data["ids"], data["lengths"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        warn_once(f"warning: {path}: unreadable token-id cache ({exc}); tokenizing again")
        return None
    if len(lengths) != count or int(lengths.sum()) != len(ids):
        warn_once(f"warning: {path}: token-id cache does not match its corpus; tokenizing again")
        return None
    return TokenizedTexts(torch.from_numpy(ids.astype(np.int32)), torch.from_numpy(lengths))


def _write(path: Path, tokens: TokenizedTexts) -> None:
    """Store ``tokens`` at ``path`` atomically (a unique temporary file, then a rename, so
    concurrent writers of one corpus never see a half-written file)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npz", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, ids=tokens.ids.numpy(), lengths=tokens.lengths.numpy())
            os.replace(name, path)
        finally:
            Path(name).unlink(missing_ok=True)
    except OSError as exc:
        warn_once(f"warning: {path}: token-id cache not written ({exc})")


__all__ = ["TokenIdCache", "corpus_hash", "tokenizer_fingerprint"]
