"""One GradCache step for every model family: forward a rank's share in chunks, gather over
ranks, compute the loss, back-propagate (directly, or through cached output gradients).

A family describes each text group it encodes as a `ChunkedGroup`: this rank's contiguous
share ``[lo, hi)`` of ``total`` items, its chunk plan, and how to run one chunk forward (a
bi-encoder embeds texts or returns token states; a reranker scores (query, document) pairs,
one logit each). `chunked_step` then does the rest, identically for every family:

- **plain** (``chunking`` None): every chunk forward with its graph, outputs gathered over
  ranks (the local share stays differentiable), loss, one ``backward``;
- **GradCache** (Gao et al. 2021, a `Chunking`): a no-grad pass over every chunk,
  recording the RNG state before each; the loss is back-propagated to the gathered outputs
  only; then each chunk is run again from its recorded RNG state (so dropout masks are the
  same as in the first pass) and back-propagated with its slice of the cached gradient.
  Activations of one chunk are alive at a time, and the parameter gradient equals the plain
  step's over the same chunks. With ``retain_last`` (the default) the last chunk of the last
  group keeps its graph from the first pass and is back-propagated first, before any other
  chunk is run again: one chunk's activations are still the most alive at a time, and that
  chunk is not run twice. With ``retain_tokens`` the chunks before it in that group keep
  their graphs too, from the end backwards, while their padded tokens together stay within
  that budget (the tokens whose activations fit in memory at once, `dualview.train.memory`):
  each of them saves its second forward pass, and the peak is that of one chunk of
  ``retain_tokens`` tokens. The RNG state after the step is the one after the first pass, as
  without it.

Summing parameter gradients over ranks afterwards (`dualview.train.step.all_reduce_gradients`)
gives the single-process full-batch gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.distributed as dist

from dualview.models.tokens import PAD_MULTIPLE

RngState = tuple[torch.Tensor, list[torch.Tensor]]


def rng_state() -> RngState:
    """The CPU and CUDA RNG states (what dropout draws from), to replay a forward pass."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return torch.get_rng_state(), cuda


def set_rng_state(state: RngState) -> None:
    """Restore a state from `rng_state`."""
    torch.set_rng_state(state[0])
    if state[1]:
        torch.cuda.set_rng_state_all(state[1])


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


def gather(local: torch.Tensor, total: int) -> torch.Tensor:
    """`gather_rows` for rows of any shape: [n] logits, [n, H] embeddings, [n, W, H] states."""
    if local.dim() == 2:
        return gather_rows(local, total)
    if local.dim() == 1:
        return gather_rows(local.unsqueeze(1), total).squeeze(1)
    return gather_rows(local.flatten(1), total).view(total, *local.shape[1:])


@dataclass(frozen=True)
class Chunking:
    """How GradCache cuts a share of texts: length-sorted chunks bounded in texts and tokens.

    ``max_tokens`` bounds a chunk's padded size (texts x longest text), which is what its
    activations cost; ``max_items`` bounds its number of texts. ``pad_multiple`` rounds each
    chunk's width up (8: tensor-core friendly; 64 or 128: a few static shapes, which
    ``torch.compile`` reuses instead of recompiling per width). Padding is masked, so the
    embeddings do not depend on it beyond float rounding. ``retain_last``: the last chunk
    keeps its graph from the no-grad pass instead of running twice, and so do the chunks
    before it that fit in ``retain_tokens`` padded tokens with it (`chunked_step`).
    """

    max_items: int | None = None
    max_tokens: int | None = None
    pad_multiple: int = PAD_MULTIPLE
    retain_last: bool = True
    retain_tokens: int = 0


class ChunkedGroup(Protocol):
    """One text group of a batch as this rank runs it (see the module docstring)."""

    lo: int
    hi: int
    total: int
    chunks: list[list[int]]  # absolute indices in [lo, hi), one list per chunk

    def feature_shape(self) -> tuple[int, ...]:
        """The shape of one item's output: () for a logit, (H,) or (W, H) for texts."""
        ...

    def forward(self, chunk: list[int]) -> torch.Tensor:
        """The outputs [len(chunk), *feature_shape] of one chunk, as float32."""
        ...

    def chunk_tokens(self, chunk: list[int]) -> int:
        """The tokens the model runs for one chunk, padding included (its activations' size)."""
        ...


def _rows(group: ChunkedGroup, chunk: list[int], device: torch.device) -> torch.Tensor:
    return torch.tensor([i - group.lo for i in chunk], device=device, dtype=torch.long)


def kept_chunks(group: ChunkedGroup, retain_tokens: int = 0) -> int:
    """How many trailing chunks of ``group`` keep their first-pass graph: the last one, and
    before it as many as fit in ``retain_tokens`` padded tokens together with it."""
    if not group.chunks:
        return 0
    count, used = 1, group.chunk_tokens(group.chunks[-1])
    for chunk in reversed(group.chunks[:-1]):
        used += group.chunk_tokens(chunk)
        if used > retain_tokens:
            break
        count += 1
    return count


def forward_share(
    group: ChunkedGroup,
    device: torch.device,
    grad: bool,
    states: list[RngState] | None = None,
    keep: int = 0,
) -> torch.Tensor:
    """Outputs [hi - lo, *feature_shape] of the share in input order; with ``states``, the
    RNG state before each chunk is appended to it; the last ``keep`` chunks run with their
    graphs even when ``grad`` is off (the result back-propagates into them alone)."""
    out = torch.zeros(group.hi - group.lo, *group.feature_shape(), device=device)
    if not group.chunks:
        return out.requires_grad_(grad) if grad else out
    parts = []
    first_kept = len(group.chunks) - keep
    for number, chunk in enumerate(group.chunks):
        if states is not None:
            states.append(rng_state())
        with torch.set_grad_enabled(grad or number >= first_kept):
            parts.append(group.forward(chunk))
    rows = torch.cat([_rows(group, chunk, device) for chunk in group.chunks])
    return out.index_copy(0, rows, torch.cat(parts))


LossOf = Callable[[dict[str, torch.Tensor]], torch.Tensor]


def chunked_step(
    groups: Mapping[str, ChunkedGroup],
    loss_of: LossOf,
    device: torch.device,
    chunking: Chunking | None,
    *,
    scale: float = 1.0,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward,
) -> torch.Tensor:
    """Accumulate ``scale`` x the gradient of ``loss_of(gathered outputs)``; returns the loss.

    ``chunking`` None: the plain step; else GradCache over the groups' chunks (which the
    families planned from it), keeping the graphs `rerun_chunks` leaves out."""
    if chunking is None:
        with autocast():
            gathered = {
                name: gather(forward_share(group, device, grad=True), group.total)
                for name, group in groups.items()
            }
            loss = loss_of(gathered)
        backward(loss * scale)
        return loss
    rerun = rerun_chunks(groups, chunking)
    return _gradcache(groups, loss_of, device, scale, autocast, backward, rerun)


def rerun_chunks(
    groups: Mapping[str, ChunkedGroup], chunking: Chunking
) -> dict[str, list[list[int]]]:
    """The chunks of each group that a GradCache step runs a second time: all of them, less
    (with ``chunking.retain_last``) the trailing chunks of the last group that keep their
    first-pass graphs (`kept_chunks` within ``chunking.retain_tokens``)."""
    rerun = {name: list(group.chunks) for name, group in groups.items()}
    if chunking.retain_last and groups:
        last = list(groups)[-1]
        keep = kept_chunks(groups[last], chunking.retain_tokens)
        rerun[last] = rerun[last][: len(rerun[last]) - keep]
    return rerun


def _gradcache(groups, loss_of, device, scale, autocast, backward, rerun) -> torch.Tensor:
    """The GradCache step; ``rerun``: the chunks of each group run again (`rerun_chunks`),
    the others keep their first-pass graphs."""
    states: dict[str, list[RngState]] = {name: [] for name in groups}
    cached: dict[str, torch.Tensor] = {}
    graph, kept = None, ""  # the outputs differentiable through kept chunks (one group at most)
    with autocast():
        for name, group in groups.items():
            keep = len(group.chunks) - len(rerun[name])
            local = forward_share(group, device, False, states[name], keep)
            if local.requires_grad:
                graph, kept = local, name
            cached[name] = local.detach().requires_grad_(True)
        loss = loss_of({name: gather(cached[name], groups[name].total) for name in groups})
    after = rng_state()
    backward(loss * scale)
    if graph is not None and cached[kept].grad is not None:
        graph.backward(gradient=cached[kept].grad)  # first: its activations go before any rerun
    del graph
    for name, group in groups.items():
        grad = cached[name].grad
        if grad is None:
            continue
        for chunk, state in zip(rerun[name], states[name], strict=False):
            set_rng_state(state)
            with autocast():
                out = group.forward(chunk)
            out.backward(gradient=grad[_rows(group, chunk, grad.device)])
    set_rng_state(after)
    return loss
