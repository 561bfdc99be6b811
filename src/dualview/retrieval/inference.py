"""The encoding loop behind `dualview.retrieval.encode.Encoder`: one model, one device.

``SentenceTransformer.encode`` tokenizes every batch on the host between two forward passes,
so a GPU waits for the tokenizer (about 600 texts of 512 tokens a second on an H100, whatever
the precision). `encode_sorted` runs the same two steps the same way, overlapped:

- **Tokenization in worker processes**: a ``torch`` ``DataLoader`` over the batches (forked
  workers, pinned memory on CUDA, a few batches prefetched per worker) calls the model's own
  ``preprocess`` (the prompt, ``prompt_length`` for pooling, truncation at ``max_seq_length``:
  exactly what ``encode`` does), while the main process runs ``model(features)`` on earlier
  batches. Processes, not threads: a fast tokenizer is stateful (padding and truncation are
  set on it per call), so threads would each need their own copy of the model's input
  module; forked workers get theirs for free, share the weights' memory, and leave the GIL
  (lists to tensors is Python work) to the forward pass. They fork before any progress bar
  thread starts, with ``TOKENIZERS_PARALLELISM=false`` (the Rust pool does not survive a
  fork), and a silent worker is an error after `WORKER_TIMEOUT_S`.
- **No sync per batch**: embeddings stay on the device until a chunk of batches is done, so
  the host queues batch ``k + 1`` while the device still runs batch ``k``.
- **Precision**: `cast_model` casts the weights (half-precision weights beat autocast
  for inference: no per-call weight casts, half the memory traffic); outputs are float32.

Texts come in sorted by length (the caller sorts) and are cut into chunks of ``chunk_size``,
each cut into batches, so padding stays small and every chunk can be cached as it finishes.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np

from dualview.errors import DualviewError

#: Accepted ``precision`` values; ``auto`` is bf16 on CUDA (fp16 without bf16), fp32 elsewhere.
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
#: Most tokenizer processes per device by default (each keeps about one core busy).
MAX_AUTO_WORKERS = 8
#: Batches each worker tokenizes ahead.
PREFETCH = 4
#: Seconds without a batch from the tokenizer workers before giving up.
WORKER_TIMEOUT_S = 300


@dataclass
class EncodeStats:
    """What an encoding did: texts, real and padded tokens, wall-clock seconds."""

    texts: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0

    def add(self, other: EncodeStats) -> None:
        self.texts += other.texts
        self.tokens += other.tokens
        self.padded_tokens += other.padded_tokens
        self.seconds += other.seconds

    @property
    def padding(self) -> float:
        """Share of the positions the model ran on that were padding."""
        return 1 - self.tokens / self.padded_tokens if self.padded_tokens else 0.0

    def to_dict(self) -> dict[str, float]:
        """The counts plus ``texts_per_s``, ``tokens_per_s`` (real tokens) and ``padding``."""
        rate = 1 / self.seconds if self.seconds > 0 else 0.0
        return {
            **asdict(self),
            "texts_per_s": round(self.texts * rate, 1),
            "tokens_per_s": round(self.tokens * rate, 1),
            "padding": round(self.padding, 4),
        }


def resolve_precision(precision: str, device: str) -> str:
    """``fp32``/``fp16``/``bf16`` for ``precision`` on ``device`` (see `PRECISIONS`)."""
    if precision not in PRECISIONS:
        raise DualviewError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision != "auto":
        return precision
    if not device.startswith("cuda"):
        return "fp32"
    from dualview.perf import cuda_half_precision

    return cuda_half_precision()


def torch_dtype(precision: str) -> Any:
    """The ``torch`` dtype of a resolved precision."""
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


def default_workers(device: str, processes: int = 1) -> int:
    """Tokenizer processes per device: none on CPU (the model wants every core), a few on GPUs.

    ``processes``: devices encoding at once, which share the host's cores.
    """
    if not device.startswith("cuda") or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    spare = (cores or 1) // processes - 1  # one core per device drives the forward passes
    return max(1, min(MAX_AUTO_WORKERS, spare))


def model_dtype(model: Any) -> Any:
    """The dtype of the model's first floating-point parameter."""
    return next(p.dtype for p in model.parameters() if p.is_floating_point())


def cast_model(model: Any, precision: str, in_place: bool) -> Any:
    """``model`` with its weights in ``precision``: itself, cast in place, or a cast copy."""
    dtype = torch_dtype(precision)
    if model_dtype(model) == dtype:
        return model
    target = model if in_place else copy.deepcopy(model)
    return target.to(dtype)


class TokenizedBatch(NamedTuple):
    """Model inputs of one batch and its real / padded token counts (a tuple: the loader
    pins the tensors inside it)."""

    features: dict[str, Any]
    tokens: int
    padded_tokens: int


class Tokenize:
    """Callable run in the tokenizer workers: ``texts -> TokenizedBatch`` via ``preprocess``."""

    def __init__(self, model: Any, prompt: str | None) -> None:
        self.model = model
        self.prompt = prompt or None

    def __call__(self, texts: list[str]) -> TokenizedBatch:
        features = dict(self.model.preprocess(texts, prompt=self.prompt))
        mask = features.get("attention_mask")
        if mask is None:  # flattened inputs (variable-length attention): no padding at all
            total = int(features["input_ids"].numel())
            return TokenizedBatch(features, total, total)
        return TokenizedBatch(features, int(mask.sum()), int(mask.numel()))


def batch_spans(n: int, batch_size: int, chunk_size: int) -> list[list[tuple[int, int]]]:
    """``[start, stop)`` of every batch, grouped by chunk (no batch crosses a chunk border)."""
    chunks = []
    for chunk_start in range(0, n, chunk_size):
        chunk_stop = min(n, chunk_start + chunk_size)
        starts = range(chunk_start, chunk_stop, batch_size)
        chunks.append([(s, min(chunk_stop, s + batch_size)) for s in starts])
    return chunks


@contextmanager
def _quiet_tokenizer_fork() -> Iterator[None]:
    """Fork tokenizer workers single-threaded, without the tokenizers library's fork warning.

    The variable is set only while the workers start; the caller's own setting comes back.
    """
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def tokenized_batches(
    batches: Sequence[list[str]], tokenize: Tokenize, workers: int, pin: bool
) -> Iterator[TokenizedBatch]:
    """``tokenize(batch)`` for each batch in order, in ``workers`` forked processes (0: inline).

    The workers fork now, not at the first ``next``: a thread started later (a progress
    bar's) cannot be caught holding a lock by the fork. A worker silent for
    `WORKER_TIMEOUT_S` is an error, not a stall.
    """
    if workers <= 0:
        return map(tokenize, batches)
    from torch.utils.data import DataLoader

    loader = DataLoader(
        batches,  # type: ignore[arg-type]  # a list of batches is a map-style dataset
        batch_size=None,  # each item is already a batch: collate_fn tokenizes it
        collate_fn=tokenize,
        num_workers=workers,
        pin_memory=pin,
        prefetch_factor=PREFETCH,
        multiprocessing_context="fork",
        timeout=WORKER_TIMEOUT_S,
    )
    with _quiet_tokenizer_fork():
        return iter(loader)


def _forward(model: Any, features: dict[str, Any]) -> Any:
    """Sentence embeddings of one batch, left on the model's device (no host sync)."""
    import torch

    device = model.device
    moved = {
        k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
        for k, v in features.items()
    }
    truncate = getattr(model, "truncate_dim", None)
    with torch.inference_mode():
        embeddings = model(moved)["sentence_embedding"]
        return embeddings[:, :truncate] if truncate else embeddings


def _to_host(parts: list[Any]) -> np.ndarray:
    import torch

    with torch.inference_mode():
        return torch.cat(parts).float().cpu().numpy()


def _encode_with_st(
    model: Any,
    texts: Sequence[str],
    prompt: str | None,
    batch_size: int,
    chunks: list[list[tuple[int, int]]],
) -> Iterator[tuple[int, np.ndarray, EncodeStats]]:
    """Chunks through ``model.encode`` (no workers, no token counts), for old versions."""
    for chunk in chunks:
        start, stop = chunk[0][0], chunk[-1][1]
        vectors = model.encode(
            list(texts[start:stop]),
            prompt=prompt or None,
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        yield start, vectors.astype(np.float32, copy=False), EncodeStats(stop - start)


def encode_sorted(
    model: Any,
    texts: Sequence[str],
    prompt: str | None,
    batch_size: int,
    workers: int,
    chunk_size: int,
) -> Iterator[tuple[int, np.ndarray, EncodeStats]]:
    """Encode ``texts`` (already sorted by length) with ``model`` on its device, as it is.

    Returns an iterator of ``(start, vectors, stats)`` per chunk of ``chunk_size`` texts, in
    order: rows ``start .. start + len(vectors)`` of ``texts``, float32, not normalized. The
    tokenizer workers are already running when it returns.
    """
    model.eval()
    chunks = batch_spans(len(texts), batch_size, chunk_size)
    if not hasattr(model, "preprocess"):  # sentence-transformers < 6: its own encode loop
        return _encode_with_st(model, texts, prompt, batch_size, chunks)
    spans = [span for chunk in chunks for span in chunk]
    workers = min(workers, len(spans) - 1)  # a single batch has nothing to overlap with
    pin = model.device.type == "cuda"
    batches = tokenized_batches(
        [list(texts[a:b]) for a, b in spans], Tokenize(model, prompt), workers, pin
    )
    return _embed_chunks(model, chunks, batches)


def encode_token_ids(
    model: Any,
    tokens: Any,
    pad_id: int,
    batch_size: int,
    chunk_size: int,
    extra: dict[str, Any] | None = None,
) -> Iterator[tuple[int, np.ndarray, EncodeStats]]:
    """`encode_sorted` on texts already tokenized (a `dualview.models.tokens.TokenizedTexts`
    in the texts' order): no tokenizer in the loop, each batch padded from the ids, with the
    non-tensor ``extra`` entries ``preprocess`` adds (``modality``)."""
    model.eval()
    chunks = batch_spans(len(tokens), batch_size, chunk_size)
    pin = model.device.type == "cuda"
    left = getattr(model.tokenizer, "padding_side", "right") == "left"

    def batches() -> Iterator[TokenizedBatch]:
        for chunk in chunks:
            for start, stop in chunk:
                span = range(start, stop)
                features = tokens.pad(span, pad_id, left=left, max_length=model.max_seq_length)
                mask = features["attention_mask"]
                if pin:
                    features = {k: v.pin_memory() for k, v in features.items()}
                features.update(extra or {})
                yield TokenizedBatch(features, int(mask.sum()), int(mask.numel()))

    return _embed_chunks(model, chunks, batches())


def _embed_chunks(
    model: Any, chunks: list[list[tuple[int, int]]], batches: Iterator[TokenizedBatch]
) -> Iterator[tuple[int, np.ndarray, EncodeStats]]:
    """Run the model on the tokenized batches; one host copy per chunk."""
    for chunk in chunks:
        parts, stats = [], EncodeStats()
        for (start, stop), batch in zip(chunk, batches, strict=False):  # batches: all chunks'
            parts.append(_forward(model, batch.features))
            stats.add(EncodeStats(stop - start, batch.tokens, batch.padded_tokens))
        yield chunk[0][0], _to_host(parts), stats


__all__ = [
    "PRECISIONS",
    "EncodeStats",
    "Tokenize",
    "batch_spans",
    "cast_model",
    "default_workers",
    "encode_sorted",
    "encode_token_ids",
    "resolve_precision",
    "torch_dtype",
]
