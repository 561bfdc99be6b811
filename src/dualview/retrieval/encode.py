"""Batched encoding of texts with any sentence-transformers model, with an on-disk cache.

`Encoder` wraps a ``SentenceTransformer`` (a local folder, a Hub name, one of our
checkpoints, or ``embedded:minilm``) and turns lists of texts into ``float32`` arrays.

- **Sorting by length**: the texts still to encode are sorted by length (longest first) and
  cut into chunks, so every batch holds texts of similar length and padding stays small.
- **Cache**: every embedding is stored under `dualview.resources.cache_dir` in one
  SQLite file per model fingerprint, keyed by ``sha256(prompt, text)``. A second encoding of
  the same texts with the same model and prompt reads them back instead of running the model.
  Chunks are committed as they finish, so an interrupted encoding resumes where it stopped.
- **Fingerprint**: a hash of the model's module layout (pooling, normalization, max length),
  its prompts and every parameter tensor, so the same weights share one cache whatever path
  they were loaded from, and a retrained checkpoint never reads stale vectors; and the
  precision unless fp32, so half-precision vectors are never served to an fp32 request.
- **Fast path** (`dualview.retrieval.inference`): the model's own ``preprocess`` in
  tokenizer worker processes overlapped with the forward passes, bf16 weights on CUDA by
  default (``precision="fp32"`` forces full precision), several devices at once with
  ``devices=[...]`` (`dualview.retrieval.devices`). `Encoder.stats` counts texts,
  real and padded tokens and seconds.

Example::

    enc = Encoder("embedded:minilm", batch_size=64)
    docs = enc.encode(["a passage", "another passage"])          # (2, 384) float32
    queries = enc.encode(["a query"], prompt="query: ")           # literal prompt text
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from dualview.errors import DualviewError, warn_once
from dualview.models.compiled import compile_backbone
from dualview.models.fingerprint import update_with_weights
from dualview.models.interaction import encode_instructed_queries
from dualview.models.pretrained import UNUSED_BY_EMBEDDINGS, load_whole
from dualview.models.saved import load_interaction_head, require_bi_encoder
from dualview.models.token_cache import TokenIdCache
from dualview.progress import track
from dualview.resources import cache_dir, resolve_model_path
from dualview.retrieval.devices import balanced_shares, encode_on_devices
from dualview.retrieval.inference import (
    EncodeStats,
    cast_model,
    default_workers,
    encode_sorted,
    encode_token_ids,
    resolve_precision,
)
from dualview.retrieval.text import InstructedQuery

#: Texts encoded per cache commit; large enough to keep the model busy, small enough to resume.
CHUNK_SIZE = 1024
#: SQLite caps the number of ``?`` parameters per statement.
_LOOKUP_BATCH = 900


def load_sentence_transformer(name: str, device: str | None = None, **kwargs: Any) -> Any:
    """Load ``name`` (path, Hub name, ``embedded:minilm``) as a ``SentenceTransformer``.

    A model that cannot be found or loaded, a folder that holds a reranker
    (`dualview.models.saved.require_bi_encoder`), or one whose weights do not cover the model
    (`dualview.models.pretrained.load_whole`) is a one-line `DualviewError`.
    """
    from sentence_transformers import SentenceTransformer

    require_bi_encoder(resolve_model_path(name))
    unused = UNUSED_BY_EMBEDDINGS
    return load_whole(SentenceTransformer, name, None, unused, device=device, **kwargs)


def text_key(text: str, prompt: str | None) -> str:
    """Cache key of one text under one prompt (the prompt is part of what the model reads)."""
    payload = f"{prompt or ''}\x00{text}".encode()
    return hashlib.sha256(payload).hexdigest()[:32]


def model_fingerprint(model: Any) -> str:
    """Content hash of a ``SentenceTransformer``: module layout, prompts and all weights.

    Hashing the weights costs about a second per GB and is done once per `Encoder`.
    """
    digest = hashlib.sha256()
    digest.update(repr(model).encode())  # modules with their configs (pooling, max length)
    digest.update(repr(sorted(getattr(model, "prompts", {}).items())).encode())
    digest.update(str(getattr(model, "max_seq_length", "")).encode())
    update_with_weights(digest, model)
    return digest.hexdigest()[:24]


class EmbeddingCache:
    """SQLite store ``key -> float32 vector`` for one model fingerprint.

    One file per fingerprint: ``<cache_dir>/<FOLDER>/<fingerprint>.sqlite`` (`FOLDER`:
    ``embeddings``; a subclass stores other vectors in a folder of its own, e.g. reranker
    scores as vectors of size 1, `dualview.retrieval.rerank.ScoreCache`). Safe to share
    between processes (SQLite locking, WAL journal); duplicate inserts are ignored. A file
    that is not a readable database is reported once, moved aside (``.damaged``) and started
    afresh; a stored vector of the wrong size is ignored, so its text is encoded again.
    """

    #: the folder under the cache root that holds the files
    FOLDER = "embeddings"
    #: what the vectors are, for messages
    LABEL = "embedding"

    def __init__(self, fingerprint: str, root: Path | None = None) -> None:
        folder = (root or cache_dir()) / self.FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{fingerprint}.sqlite"
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            warn_once(f"warning: {self.path}: damaged {self.LABEL} cache ({exc}); starting afresh")
            self._conn.close()
            for suffix in ("", "-wal", "-shm"):
                part = Path(f"{self.path}{suffix}")
                if part.exists():
                    part.replace(f"{part}.damaged")
            self._open()

    def _open(self) -> None:
        self._conn = sqlite3.connect(self.path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB)")
        self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()  # reads the pages: damage shows
        self._conn.commit()

    def get_many(self, keys: Sequence[str], dim: int | None = None) -> dict[str, np.ndarray]:
        """Vectors found for ``keys`` (missing keys are absent from the result); with ``dim``,
        a vector of another size (a damaged entry) counts as missing."""
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _LOOKUP_BATCH):
            part = unique[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(part))
            rows = self._conn.execute(f"SELECT key, vec FROM emb WHERE key IN ({marks})", part)
            for key, blob in rows:
                if dim is not None and (not isinstance(blob, bytes) or len(blob) != 4 * dim):
                    warn_once(f"warning: {self.path}: damaged entries ignored and recomputed")
                    continue
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` under ``keys[i]`` and commit."""
        rows = [
            (k, np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for k, v in zip(keys, vectors, strict=True)
        ]
        self._conn.executemany("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", rows)
        self._conn.commit()

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        self._conn.close()


class Encoder:
    """Encode texts with a sentence-transformers model, in length-sorted batches, cached.

    Args:
        model: a path, a Hub name, ``embedded:minilm``, or an already loaded
            ``SentenceTransformer`` (never changed: when it must run in another precision,
            the encoder runs a cast copy).
        batch_size: texts per forward pass.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None`` lets sentence-transformers pick.
        cache: read and write the on-disk embedding cache.
        normalize: L2-normalize the returned vectors. ``None`` (default) normalizes when the
            model scores with cosine similarity, so that a dot product equals its score.
        show_progress: show progress over the texts (`dualview.progress.track`: a bar on a
            terminal when there is more than one chunk, periodic lines in a log).
        precision: ``"auto"`` (bf16 on CUDA, fp16 where bf16 is missing, fp32 on CPU),
            ``"fp32"``, ``"fp16"`` or ``"bf16"``: the weights and activations of the forward
            pass; the vectors are float32 either way. Part of `fingerprint`.
        num_workers: tokenizer processes per device; ``None``: 0 on CPU, a few on CUDA
            (`dualview.retrieval.inference.default_workers`).
        devices: two or more devices (``["cuda:0", "cuda:1"]``) to encode on at once, one
            process each (`dualview.retrieval.devices`); excludes ``device``.
        token_cache: a `dualview.models.token_cache.TokenIdCache` (``True``: the default
            one under the cache root): the texts' token ids are read from it, or made once
            and stored, and batches are padded from them with no tokenizer in the loop; every
            model with the same tokenizer reuses them. One device only; a model whose own
            preprocessing gives other inputs (checked on the first batch) is encoded as usual.
        compile: ``torch.compile`` each transformer layer of the model that runs
            (`dualview.models.compiled`, ``compile: layers``; the first batches of each new
            width pay the compile); the vectors match the eager ones up to float rounding.
            Worth it for large encodings on a GPU; off by default. One device only; when
            the given model already runs in `precision`, its own layers are compiled. A
            string names the ``torch.compile`` backend (default ``inductor``).
    """

    def __init__(
        self,
        model: str | Any,
        batch_size: int = 32,
        device: str | None = None,
        cache: bool = True,
        normalize: bool | None = None,
        show_progress: bool = True,
        precision: str = "auto",
        num_workers: int | None = None,
        devices: Sequence[str] | None = None,
        token_cache: TokenIdCache | bool | None = None,
        compile: bool | str = False,
    ) -> None:
        device, several = _split_devices(device, devices)
        self._owns_model = isinstance(model, str)
        if isinstance(model, str):
            self.name = model
            self.model = load_sentence_transformer(model, device=device)
        else:
            self.name = type(model).__name__
            self.model = model
        self.batch_size = batch_size
        self.use_cache = cache
        self.show_progress = show_progress
        self.num_workers = num_workers
        #: Where the encoding runs: the model's device, or the several ``devices``.
        self.devices = several or [str(self.model.device)]
        self.precision = resolve_precision(precision, self.devices[0])
        self.stats = EncodeStats()
        similarity = getattr(self.model, "similarity_fn_name", None) or "cosine"
        self.normalize = similarity == "cosine" if normalize is None else normalize
        self.token_cache = TokenIdCache() if token_cache is True else token_cache or None
        self.used_token_cache = False
        self.compile = compile
        #: The interaction head of a saved model (`dualview.models.saved`), else None.
        self.head = _load_head(model) if isinstance(model, str) else None

    @cached_property
    def fingerprint(self) -> str:
        """Content hash of the model as loaded (see `model_fingerprint`) and, unless it
        is fp32, the precision it runs in; names the cache file."""
        weights = model_fingerprint(self.model)
        if self.head is not None:
            head = hashlib.sha256(weights.encode())
            for tensor in self.head.state_dict().values():
                head.update(tensor.detach().cpu().float().numpy().tobytes())
            weights = head.hexdigest()[:24]
        if self.precision == "fp32":  # as before precisions existed: older caches stay valid
            return weights
        return hashlib.sha256(f"{weights}:{self.precision}".encode()).hexdigest()[:24]

    @cached_property
    def cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.fingerprint)

    @cached_property
    def runner(self) -> Any:
        """The model that runs on one device, in `precision` (for one device only)."""
        if self._owns_model:
            _ = self.fingerprint  # of the weights as loaded, before any cast
        runner = cast_model(self.model, self.precision, in_place=self._owns_model)
        if self.compile:
            backend = self.compile if isinstance(self.compile, str) else "inductor"
            compile_backbone(runner[0].auto_model, "layers", backend=backend)
        return runner

    @property
    def dim(self) -> int:
        """Embedding size."""
        getter = getattr(self.model, "get_embedding_dimension", None)
        getter = getter or self.model.get_sentence_embedding_dimension  # sentence-transformers<6
        return int(getter())

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None) -> str:
        """The literal prompt text: ``prompt``, or the model's prompt called ``prompt_name``."""
        if prompt is not None and prompt_name is not None:
            raise DualviewError("give either prompt or prompt_name, not both")
        if prompt_name is not None:
            prompts = getattr(self.model, "prompts", {}) or {}
            if prompt_name not in prompts:
                raise DualviewError(
                    f"model {self.name!r} has no prompt {prompt_name!r} "
                    f"(it has: {sorted(prompts) or 'none'})"
                )
            return prompts[prompt_name]
        return prompt or ""

    def encode(
        self,
        texts: Sequence[str],
        prompt: str | None = None,
        prompt_name: str | None = None,
        description: str = "encoding",
    ) -> np.ndarray:
        """Embeddings of ``texts`` as a ``(len(texts), dim)`` float32 array, in input order.

        ``prompt`` is literal text the model reads before each text (e.g. ``"query: "``);
        ``prompt_name`` picks one of the model's own prompts instead. Duplicate texts are
        encoded once; cached texts are not encoded again. `stats` adds up what ran.
        """
        prompt_text = self.resolve_prompt(prompt, prompt_name)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if self.head is not None and all(isinstance(t, InstructedQuery) for t in texts):
            return self._encode_instructed(texts, prompt_text)
        keys = [text_key(t, prompt_text) for t in texts]
        known = self.cache.get_many(keys, self.dim) if self.use_cache else {}
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in known:
                todo.setdefault(key, text)
        for chunk_keys, vectors in self._encode_missing(todo, prompt_text, description):
            known.update(zip(chunk_keys, vectors, strict=True))
        for row, key in enumerate(keys):
            out[row] = known[key]
        if self.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.maximum(norms, 1e-12)
        return out

    def _encode_instructed(self, texts: Sequence[InstructedQuery], prompt: str) -> np.ndarray:
        """Queries of a model with an interaction head: each distinct instruction encoded once,
        then the head (not cached: the head is cheap beside the backbone). A head that adds to
        the concatenation embedding gets those of the joined texts (cached as usual)."""
        base = None
        if self.head.uses_base:
            base = self.encode([str(t) for t in texts], prompt=prompt)
        started = time.perf_counter()
        vectors = encode_instructed_queries(
            self.runner,
            self.head,
            [t.query for t in texts],
            [t.instruction for t in texts],
            batch_size=self.batch_size,
            normalize=self.normalize,
            base=base,
        )
        self.stats.seconds += time.perf_counter() - started
        return vectors.numpy().astype(np.float32)

    def _encode_missing(
        self, todo: dict[str, str], prompt: str, description: str
    ) -> Iterator[tuple[list[str], np.ndarray]]:
        """Encode ``key -> text`` longest first, one chunk at a time, caching each chunk."""
        if not todo:
            return
        order = sorted(todo, key=lambda k: len(todo[k]), reverse=True)
        texts = [todo[k] for k in order]
        started = time.perf_counter()
        chunks = self._run(texts, prompt)
        steps = chunks
        if self.show_progress:
            steps = track(chunks, description, len(texts), size=_chunk_rows, bar_above=CHUNK_SIZE)
        try:
            for start, vectors, stats in steps:
                chunk = order[start : start + len(vectors)]
                if self.use_cache:
                    self.cache.put_many(chunk, vectors)
                self.stats.add(stats)
                yield chunk, vectors
        finally:
            self.stats.seconds += time.perf_counter() - started

    def _shares(self, texts: list[str]) -> list[tuple[int, int]]:
        """The rows of the length-sorted ``texts`` each device encodes."""
        if len(self.devices) == 1:
            return [(0, len(texts))]
        return balanced_shares([len(t) for t in texts], len(self.devices))

    def _run(self, texts: list[str], prompt: str) -> Iterator[tuple[int, np.ndarray, EncodeStats]]:
        """``(start, vectors, stats)`` per encoded chunk of the length-sorted ``texts``."""
        if len(self.devices) > 1:
            return encode_on_devices(
                self.model,
                texts,
                prompt,
                self.devices,
                self.precision,
                self.batch_size,
                self.num_workers,
                CHUNK_SIZE,
            )
        runner = self.runner
        cached = self._cached_tokens(runner, texts, prompt)
        self.used_token_cache = cached is not None  # what the last encoding did
        if cached is not None:
            tokens, extra = cached
            pad_id = int(runner.tokenizer.pad_token_id)
            return encode_token_ids(runner, tokens, pad_id, self.batch_size, CHUNK_SIZE, extra)
        workers = self.num_workers
        if workers is None:
            workers = default_workers(str(runner.device))
        return encode_sorted(runner, texts, prompt, self.batch_size, workers, CHUNK_SIZE)

    def _cached_tokens(self, runner: Any, texts: list[str], prompt: str) -> tuple | None:
        """``(ids of texts from the token-id cache, preprocess's non-tensor entries)``, or None
        (no cache, or a model whose ``preprocess`` gives other inputs than its tokenizer on
        ``prompt + text``)."""
        if self.token_cache is None or not hasattr(runner, "preprocess"):
            return None
        tokenizer = getattr(runner, "tokenizer", None)
        if tokenizer is None or tokenizer.pad_token_id is None:
            return None
        full = [prompt + text for text in texts] if prompt else texts
        tokens = self.token_cache.ids(tokenizer, full, runner.max_seq_length)
        extra = _same_inputs(runner, tokens, texts, prompt)
        return None if extra is None else (tokens, extra)

    def close(self) -> None:
        """Close the cache file (the encoder can still encode; the cache reopens lazily)."""
        if "cache" in self.__dict__:
            self.cache.close()
            del self.__dict__["cache"]


#: Texts of the first batch on which cached ids are checked against ``preprocess``.
_CHECKED_TEXTS = 8


def _same_inputs(model: Any, tokens: Any, texts: list[str], prompt: str) -> dict | None:
    """The non-tensor entries of the model's own ``preprocess`` (``modality``...) when its
    tensors for the first texts hold the tokens the cached ids hold (row by row: the same
    real tokens; padding may be wider) and nothing else the forward would read; else None."""
    n = min(len(texts), _CHECKED_TEXTS)
    reference = dict(model.preprocess(list(texts[:n]), prompt=prompt or None))
    extra = {k: v for k, v in reference.items() if not hasattr(v, "shape")}
    if set(reference) - set(extra) - {"input_ids", "attention_mask", "token_type_ids"}:
        return None
    types = reference.get("token_type_ids")
    if types is not None and bool(types.any()):
        return None
    ours = tokens.pad(range(n), int(model.tokenizer.pad_token_id))
    rows = zip(reference["input_ids"], reference["attention_mask"], ours["input_ids"],
               ours["attention_mask"], strict=True)  # fmt: skip
    same = all(
        ids[mask.bool()].tolist() == own[own_mask.bool()].tolist()
        for ids, mask, own, own_mask in rows
    )
    return extra if same else None


def _chunk_rows(step: tuple[int, np.ndarray, EncodeStats]) -> int:
    """Texts in one encoded chunk (the progress's unit)."""
    return len(step[1])


def _load_head(name: str) -> Any:
    """The interaction head saved in model folder ``name``, or None."""
    return load_interaction_head(resolve_model_path(name))


def _split_devices(
    device: str | None, devices: Sequence[str] | None
) -> tuple[str | None, list[str] | None]:
    """``(device to load the model on, the devices when there are several)``.

    With several devices the model is loaded on the CPU, from where each process takes it.
    """
    if devices and device is not None:
        raise DualviewError("give either device or devices, not both")
    if not devices or len(devices) == 1:
        return (devices[0] if devices else device), None
    return "cpu", list(devices)


__all__ = [
    "CHUNK_SIZE",
    "EmbeddingCache",
    "Encoder",
    "load_sentence_transformer",
    "model_fingerprint",
    "text_key",
]
