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
states are replayed per chunk so dropout masks match between the two passes. The chunk loop,
gather and replay are `dualview.train.gradcache.chunked_step`, shared with the rerankers'
step; this module says what a bi-encoder's text groups are and how a chunk is encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from dualview.models.bi_encoder import BiEncoder, TextKind
from dualview.models.tokens import PAD_MULTIPLE, TokenizedTexts, padded_width, plan_chunks
from dualview.train.batching import Batch
from dualview.train.gradcache import (
    ChunkedGroup,
    Chunking,
    chunked_step,
    rerun_chunks,
    shard_bounds,
    world,
)
from dualview.train.objectives import Objective
from dualview.train.query_encoding import QueryEncoding, TextGroups, query_encoding


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


@dataclass
class StepStats:
    """What one contrastive step did on this rank."""

    loss: float
    queries: int
    documents: int
    lengths: list[int] = field(default_factory=list)  # real token counts this rank encoded
    padded_tokens: int = 0  # tokens fed to the model, padding included
    gradcache: bool = False
    rerun_lengths: list[int] = field(default_factory=list)  # texts GradCache ran twice

    @property
    def tokens(self) -> int:
        return sum(self.lengths)


class TokenizedGroup(ChunkedGroup, Protocol):
    """A `ChunkedGroup` whose chunks index the token ids it holds."""

    tokens: TokenizedTexts


def rerun_lengths(groups: Mapping[str, TokenizedGroup], chunking: Chunking | None) -> list[int]:
    """Real token counts of the texts a step ran a second time (GradCache's re-forward, less
    the chunks that kept their graphs): what HFU counts beyond forward + backward."""
    if chunking is None:
        return []
    rerun = rerun_chunks(groups, chunking)
    return [
        int(n)
        for name, chunks in rerun.items()
        for c in chunks
        for n in groups[name].tokens.lengths[c]
    ]


@dataclass
class _Share:
    """This rank's share of one text group, tokenized, with its chunk plan (a
    `dualview.train.gradcache.ChunkedGroup`)."""

    model: BiEncoder
    tokens: TokenizedTexts
    lo: int
    hi: int
    total: int
    kind: TextKind
    chunks: list[list[int]]  # indices into tokens (absolute), one list per chunk
    width: int | None = None  # token-state groups: padded width of the whole group
    multiple: int = PAD_MULTIPLE  # chunk widths are rounded up to a multiple of this

    def feature_shape(self) -> tuple[int, ...]:
        dim = self.model.dim
        return (dim,) if self.width is None else (self.width, dim)

    def forward(self, chunk: list[int]) -> torch.Tensor:
        """Embeddings [c, dim] of a chunk, or its token states [c, width, dim] padded to the
        group's width (on the tokenizer's padding side)."""
        model = self.model
        inputs = model.pad(self.tokens, chunk, self.kind, self.multiple)
        if self.width is None:
            return model.embed(inputs).float()
        states = model.token_states(inputs).float()  # [c, w, d], w <= the group's width
        missing = self.width - states.shape[1]
        left = model.tokenizer.padding_side == "left"
        return F.pad(states, (0, 0, missing, 0) if left else (0, 0, 0, missing))

    def chunk_tokens(self, chunk: list[int]) -> int:
        """Tokens the model runs for ``chunk``: its real tokens when chunks are packed, else
        its texts x its padded width."""
        lengths = self.tokens.lengths[chunk]
        if self.model.config.unpadded:
            return int(lengths.sum())
        limit = self.model.max_length(self.kind)
        return len(chunk) * padded_width(int(lengths.max()), limit, self.multiple)


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
        shares[name] = _Share(model, tokens, lo, hi, len(texts), kind, chunks, width, multiple)
    return shares


def _stats(loss: torch.Tensor, batch: Batch, shares: dict[str, _Share], chunking: Chunking | None):
    lengths = [
        int(v) for share in shares.values() for v in share.tokens.lengths[share.lo : share.hi]
    ]
    padded = sum(share.chunk_tokens(chunk) for share in shares.values() for chunk in share.chunks)
    return StepStats(
        float(loss.detach()),
        len(batch.query_texts),
        len(batch.doc_texts),
        lengths,
        padded,
        chunking is not None,
        rerun_lengths(shares, chunking),
    )


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
    loss = chunked_step(
        shares,
        lambda encoded: objective_loss(model, loss_fn, encoding, encoded, batch, shares),
        next(model.parameters()).device,
        chunking,
        scale=scale,
        autocast=autocast,
        backward=backward,
    )
    return _stats(loss, batch, shares, chunking)
