"""One contrastive step: encode (sharded over ranks), gather, score, back-propagate.

Every rank builds the same global batch; rank r encodes only its contiguous share of the
queries and of the de-duplicated documents, then the embeddings are all-gathered so that the
loss is computed over the whole batch on every rank. The gathered tensor keeps the local share
differentiable, so ``backward`` on rank r yields the gradient of the *global* loss through
rank r's encodings; summing parameter gradients over ranks (`all_reduce_gradients`)
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
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from dualview.models.bi_encoder import BiEncoder, TextKind
from dualview.models.tokens import PAD_MULTIPLE, TokenizedTexts, padded_width, plan_chunks
from dualview.train.batching import Batch
from dualview.train.objectives import Objective
from dualview.train.query_encoding import QueryEncoding, TextGroups, query_encoding


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
    """Sum parameter gradients over ranks (each rank holds its share of the global gradient).

    Parameters that every rank applies to the whole gathered batch (the cross-attention head)
    already hold the full gradient on each rank: they are averaged instead of summed.
    """
    _, size = world()
    if size == 1:
        return
    replicated = getattr(model, "replicated_parameters", list)()
    replicated_ids = {id(p) for p in replicated}
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            if id(param) in replicated_ids:
                param.grad.div_(size)


def text_groups(batch: Batch, loss_fn: Objective, interaction: str = "concat") -> TextGroups:
    """What has to be encoded for ``batch``: the groups ``loss_fn`` needs, as the model's
    ``interaction`` forms them (`dualview.train.query_encoding`)."""
    return query_encoding(interaction).text_groups(batch, loss_fn.needs)


def _state_mask(model: BiEncoder, share: _Share, device: torch.device) -> torch.Tensor:
    """Attention mask [total, width] of a token-state group, laid out as the states are."""
    inputs = share.tokens.pad(
        range(share.total),
        pad_id=0,
        left=model.tokenizer.padding_side == "left",
        max_length=model.max_length(share.kind),
        multiple=share.multiple,
    )
    return inputs["attention_mask"].to(device)


def objective_loss(
    model: BiEncoder,
    loss_fn: Objective,
    encoding: QueryEncoding,
    encoded: dict[str, torch.Tensor],
    batch: Batch,
    shares: dict[str, _Share],
) -> torch.Tensor:
    """The objective on the gathered encodings (turned into its groups by ``encoding``)."""
    device = encoded["documents"].device
    masks = {name: _state_mask(model, shares[name], device) for name in encoding.state_groups}
    embeddings = encoding.embeddings(model, encoded, masks, batch, loss_fn.needs)
    return loss_fn.batch_loss(embeddings, batch)


@dataclass(frozen=True)
class Chunking:
    """How GradCache cuts a share of texts: length-sorted chunks bounded in texts and tokens.

    ``max_tokens`` bounds a chunk's padded size (texts x longest text), which is what its
    activations cost; ``max_items`` bounds its number of texts. ``pad_multiple`` rounds each
    chunk's width up (8: tensor-core friendly; 64 or 128: a few static shapes, which
    ``torch.compile`` reuses instead of recompiling per width). Padding is masked, so the
    embeddings do not depend on it beyond float rounding.
    """

    max_items: int | None = None
    max_tokens: int | None = None
    pad_multiple: int = PAD_MULTIPLE


@dataclass
class StepStats:
    """What one contrastive step did on this rank."""

    loss: float
    queries: int
    documents: int
    lengths: list[int] = field(default_factory=list)  # real token counts this rank encoded
    padded_tokens: int = 0  # tokens fed to the model, padding included
    gradcache: bool = False

    @property
    def tokens(self) -> int:
        return sum(self.lengths)


@dataclass
class _Share:
    """This rank's share of one text group, tokenized, with its chunk plan."""

    tokens: TokenizedTexts
    lo: int
    hi: int
    total: int
    kind: TextKind
    chunks: list[list[int]]  # indices into tokens (absolute), one list per chunk
    width: int | None = None  # token-state groups: padded width of the whole group
    multiple: int = PAD_MULTIPLE  # chunk widths are rounded up to a multiple of this


def _shares(
    model: BiEncoder,
    batch: Batch,
    groups: TextGroups,
    chunking: Chunking | None,
    state_groups: tuple[str, ...] = (),
) -> dict[str, _Share]:
    rank, size = world()
    shares = {}
    for name, (texts, kind) in groups.items():
        tokens = batch.tokens.get(name) or model.tokenize_ids(texts, kind)
        lo, hi = shard_bounds(len(texts), size, rank)
        multiple = chunking.pad_multiple if chunking is not None else PAD_MULTIPLE
        if chunking is None:
            chunks = [list(range(lo, hi))] if hi > lo else []
        else:
            local = plan_chunks(
                tokens.lengths[lo:hi], chunking.max_items, chunking.max_tokens, multiple
            )
            chunks = [[lo + i for i in chunk] for chunk in local]
        width = None
        if name in state_groups:
            longest = int(tokens.lengths.max()) if len(tokens) else 0
            width = padded_width(longest, model.max_length(kind), multiple)
        shares[name] = _Share(tokens, lo, hi, len(texts), kind, chunks, width, multiple)
    return shares


def _encode_chunk(model: BiEncoder, share: _Share, chunk: list[int]) -> torch.Tensor:
    inputs = model.pad(share.tokens, chunk, share.kind, share.multiple)
    if share.width is None:
        return model.embed(inputs).float()
    states = model.token_states(inputs).float()  # [c, w, d], w <= the group's width
    missing = share.width - states.shape[1]
    left = model.tokenizer.padding_side == "left"
    return F.pad(states, (0, 0, missing, 0) if left else (0, 0, 0, missing))


def _feature_shape(model: BiEncoder, share: _Share) -> tuple[int, ...]:
    return (model.dim,) if share.width is None else (share.width, model.dim)


def _gather(local: torch.Tensor, total: int) -> torch.Tensor:
    """`gather_rows` for rows of any shape (token states are gathered flattened)."""
    if local.dim() == 2:
        return gather_rows(local, total)
    return gather_rows(local.flatten(1), total).view(total, *local.shape[1:])


def _encode_share(
    model: BiEncoder, share: _Share, grad: bool, states: list | None = None
) -> torch.Tensor:
    """Embeddings [hi - lo, dim] of the share in input order; records RNG states per chunk."""
    device = next(model.parameters()).device
    out = torch.zeros(share.hi - share.lo, *_feature_shape(model, share), device=device)
    if not share.chunks:
        return out.requires_grad_(grad) if grad else out
    parts = []
    for chunk in share.chunks:
        if states is not None:
            states.append(_rng_state())
        with torch.set_grad_enabled(grad):
            parts.append(_encode_chunk(model, share, chunk))
    rows = torch.cat([_chunk_rows(share, chunk, device) for chunk in share.chunks])
    return out.index_copy(0, rows, torch.cat(parts))


def _chunk_rows(share: _Share, chunk: list[int], device: torch.device) -> torch.Tensor:
    return torch.tensor([i - share.lo for i in chunk], device=device)


def _padded_tokens(model: BiEncoder, share: _Share) -> int:
    if model.config.unpadded:  # packed chunks: no padding
        return int(share.tokens.lengths[share.lo : share.hi].sum())
    limit = model.max_length(share.kind)
    return sum(
        len(chunk) * padded_width(int(share.tokens.lengths[chunk].max()), limit, share.multiple)
        for chunk in share.chunks
    )


def _stats(model: BiEncoder, loss: torch.Tensor, batch: Batch, shares, gradcache: bool):
    lengths = [
        int(v) for share in shares.values() for v in share.tokens.lengths[share.lo : share.hi]
    ]
    padded = sum(_padded_tokens(model, share) for share in shares.values())
    return StepStats(
        float(loss.detach()),
        len(batch.query_texts),
        len(batch.doc_texts),
        lengths,
        padded,
        gradcache,
    )


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor]]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor]]) -> None:
    torch.set_rng_state(state[0])
    if state[1]:
        torch.cuda.set_rng_state_all(state[1])


def contrastive_step(
    model: BiEncoder,
    loss_fn: Objective,
    batch: Batch,
    scale: float = 1.0,
    chunk_size: int | Chunking | None = None,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward,
) -> StepStats:
    """Accumulate ``scale`` x the gradient of the batch loss into ``model``'s parameters.

    ``chunk_size``: ``None`` encodes each share in one pass with gradients; an ``int`` (texts
    per chunk) or a `Chunking` turns on GradCache over length-sorted chunks. Token ids
    come from ``batch.tokens`` when the loader tokenized the batch, else are made here.
    """
    chunking = Chunking(max_items=chunk_size) if isinstance(chunk_size, int) else chunk_size
    encoding = query_encoding(model.config.interaction)
    groups = encoding.text_groups(batch, loss_fn.needs)
    shares = _shares(model, batch, groups, chunking, encoding.state_groups)
    if chunking is None:
        with autocast():
            encoded = {
                name: _gather(_encode_share(model, share, grad=True), share.total)
                for name, share in shares.items()
            }
            loss = objective_loss(model, loss_fn, encoding, encoded, batch, shares)
        backward(loss * scale)
    else:
        loss = _gradcache_step(model, loss_fn, encoding, batch, shares, scale, autocast, backward)
    return _stats(model, loss, batch, shares, chunking is not None)


def _gradcache_step(model, loss_fn, encoding, batch, shares, scale, autocast, backward):
    states: dict[str, list] = {}
    cached: dict[str, torch.Tensor] = {}
    encoded: dict[str, torch.Tensor] = {}
    for name, share in shares.items():
        states[name] = []
        with autocast():
            local = _encode_share(model, share, grad=False, states=states[name]).detach()
        cached[name] = local.requires_grad_(True)
        encoded[name] = _gather(cached[name], share.total)
    with autocast():
        loss = objective_loss(model, loss_fn, encoding, encoded, batch, shares)
    backward(loss * scale)
    for name, share in shares.items():
        grad = cached[name].grad
        if grad is None:
            continue
        for chunk, state in zip(share.chunks, states[name], strict=True):
            _set_rng_state(state)
            with autocast():
                out = _encode_chunk(model, share, chunk)
            out.backward(gradient=grad[_chunk_rows(share, chunk, grad.device)])
    return loss
