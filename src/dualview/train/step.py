"""One contrastive step: encode (sharded over ranks), gather, score, back-propagate.

Every rank builds the same global batch; rank r encodes only its contiguous share of the
queries and of the de-duplicated documents, then the embeddings are all-gathered so that the
loss is computed over the whole batch on every rank. The gathered tensor keeps the local share
differentiable, so ``backward`` on rank r yields the gradient of the *global* loss through
rank r's encodings; summing parameter gradients over ranks (:func:`all_reduce_gradients`)
gives exactly the single-process full-batch gradient.

Gradient caching (GradCache, Gao et al. 2021) splits the encoding into chunks: a no-grad pass
computes all embeddings, the loss is back-propagated to the embeddings only, and each chunk
is re-encoded with gradients and back-propagated with its cached embedding gradient. RNG
states are replayed per chunk so dropout masks match between the two passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from dualview.train.batching import Batch
from dualview.train.losses import InfEmbedLoss, RelationInfoNCE
from dualview.train.model import BiEncoder, TextKind

TextGroups = dict[str, tuple[list[str], TextKind]]


def world() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialised process group, else ``(0, 1)``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard_bounds(total: int, world_size: int, rank: int) -> tuple[int, int]:
    """Contiguous share ``[lo, hi)`` of ``total`` items for ``rank``."""
    size = math.ceil(total / world_size) if total else 0
    lo = min(rank * size, total)
    return lo, min(lo + size, total)


def gather_rows(local: torch.Tensor, total: int) -> torch.Tensor:
    """All-gather row shards into [total, H]; the local share stays differentiable."""
    rank, size = world()
    if size == 1:
        return local
    share = math.ceil(total / size)
    padded = local.new_zeros(share, local.shape[1])
    padded[: local.shape[0]] = local.detach()
    parts = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded)
    pieces = []
    for r in range(size):
        lo, hi = shard_bounds(total, size, r)
        pieces.append(local if r == rank else parts[r][: hi - lo])
    return torch.cat(pieces)


def all_reduce_gradients(model: nn.Module) -> None:
    """Sum parameter gradients over ranks (each rank holds its share of the global gradient)."""
    _, size = world()
    if size == 1:
        return
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)


def text_groups(batch: Batch, loss_fn: nn.Module) -> TextGroups:
    """What has to be encoded for ``batch`` under ``loss_fn``."""
    groups: TextGroups = {
        "queries": (batch.query_texts, "query"),
        "documents": (batch.doc_texts, "document"),
    }
    if isinstance(loss_fn, InfEmbedLoss) and loss_fn.needs_cross:
        groups["cross"] = (batch.cross_query_texts(), "query")
    return groups


def batch_loss(loss_fn: nn.Module, embeddings: dict[str, torch.Tensor], batch: Batch):
    """The objective on gathered embeddings."""
    relations = batch.relations.to(embeddings["queries"].device)
    if isinstance(loss_fn, RelationInfoNCE):
        return loss_fn(embeddings["queries"], embeddings["documents"], relations)
    cross = embeddings.get("cross")
    if cross is not None:
        n = len(batch.records)
        cross = cross.view(n, n, -1)
    target = batch.first_positive.to(relations.device)
    return loss_fn(embeddings["queries"], embeddings["documents"], relations, target, cross)


@dataclass
class StepStats:
    loss: float
    queries: int
    documents: int


def _encode_local(model: BiEncoder, texts: list[str], kind: TextKind) -> torch.Tensor:
    if not texts:
        device = next(model.parameters()).device
        return torch.zeros(0, model.dim, device=device)
    return model(texts, kind).float()


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor]]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor]]) -> None:
    torch.set_rng_state(state[0])
    if state[1]:
        torch.cuda.set_rng_state_all(state[1])


def contrastive_step(
    model: BiEncoder,
    loss_fn: nn.Module,
    batch: Batch,
    scale: float = 1.0,
    chunk_size: int | None = None,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward,
) -> StepStats:
    """Accumulate ``scale`` x the gradient of the batch loss into ``model``'s parameters."""
    rank, size = world()
    groups = text_groups(batch, loss_fn)
    shares = {
        name: texts[slice(*shard_bounds(len(texts), size, rank))]
        for name, (texts, _) in groups.items()
    }
    if chunk_size is None:
        with autocast():
            embeddings = {
                name: gather_rows(_encode_local(model, shares[name], kind), len(texts))
                for name, (texts, kind) in groups.items()
            }
            loss = batch_loss(loss_fn, embeddings, batch)
        backward(loss * scale)
    else:
        loss = _gradcache_step(
            model, loss_fn, batch, groups, shares, scale, chunk_size, autocast, backward
        )
    return StepStats(float(loss.detach()), len(batch.query_texts), len(batch.doc_texts))


def _gradcache_step(model, loss_fn, batch, groups, shares, scale, chunk_size, autocast, backward):
    cached: dict[str, tuple[list, torch.Tensor]] = {}
    embeddings: dict[str, torch.Tensor] = {}
    for name, (texts, kind) in groups.items():
        chunks, outputs = [], []
        for start in range(0, len(shares[name]), chunk_size):
            piece = shares[name][start : start + chunk_size]
            chunks.append((piece, _rng_state()))
            with torch.no_grad(), autocast():
                outputs.append(_encode_local(model, piece, kind))
        local = (torch.cat(outputs) if outputs else _encode_local(model, [], kind)).detach()
        local.requires_grad_(True)
        cached[name] = (chunks, local)
        embeddings[name] = gather_rows(local, len(texts))
    with autocast():
        loss = batch_loss(loss_fn, embeddings, batch)
    backward(loss * scale)
    for name, (_, kind) in groups.items():
        chunks, local = cached[name]
        if local.grad is None:
            continue
        grads = local.grad.split([len(piece) for piece, _ in chunks])
        for (piece, state), grad in zip(chunks, grads, strict=True):
            _set_rng_state(state)
            with autocast():
                out = _encode_local(model, piece, kind)
            out.backward(gradient=grad)
    return loss
