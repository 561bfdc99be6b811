"""One reranker step: score the batch's pairs (sharded over ranks), gather, back-propagate.

A reranker (`dualview.models.reranker.TrainableReranker`) reads each (query text, document)
pair together, so the batch's one text group is its labelled pairs
(`dualview.train.batching.Batch.pair_index`) and their "embeddings" are one logit each. The
machinery of the bi-encoder step then carries over unchanged (one `ChunkedGroup` for
`dualview.train.gradcache.chunked_step`):

- rank r scores its contiguous share of the pairs and the logits are all-gathered, the local
  share differentiable, so parameter gradients summed over ranks are the full-batch ones;
- GradCache: a no-grad pass scores every chunk of length-sorted pairs, the loss is
  back-propagated to the logits only, then each chunk is re-scored with gradients and
  back-propagated with its cached logit gradients (RNG states replayed per chunk, so dropout
  masks match). A group of 1 positive + 30 negatives per record thus costs the activations
  of one chunk, not of the whole batch;
- without GradCache, on CPU, the pairs are still scored in length-sorted chunks (each with
  its graph, one backward), which pads less than one chunk of the whole share.

Both views of an instance share their passages but not their pairs (the query text holds
the instruction), so nothing of the forward pass is shared between the views.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from dualview.models.reranker import TrainableReranker
from dualview.models.tokens import TokenizedTexts, padded_width, plan_chunks
from dualview.train.batching import Batch
from dualview.train.gradcache import chunked_step, shard_bounds, world
from dualview.train.objectives import Objective
from dualview.train.step import Chunking, StepStats, rerun_lengths

GROUP = "pairs"


def pair_tokens(model: TrainableReranker, batch: Batch) -> TokenizedTexts:
    """Token ids of the batch's pairs: the loader's, else tokenized now."""
    tokens = batch.tokens.get(GROUP)
    return tokens if tokens is not None else model.tokenize_pairs(*batch.pair_texts())


#: Without GradCache on CPU, pairs are still scored in length-sorted chunks of at most this
#: many padded tokens, every chunk with its graph, then one backward: the same gradient with
#: less padding (a CPU's time grows with the padded tokens; on the gold set's batches of
#: 4 records x 8 pairs, 20-30% fewer tokens than one chunk padded to the longest pair).
PLAIN_CPU_CHUNK_TOKENS = 2048


def _chunks(
    tokens: TokenizedTexts, lo: int, hi: int, chunking: Chunking | None, device: torch.device
) -> list[list[int]]:
    if chunking is None and device.type == "cpu":
        chunking = Chunking(max_tokens=PLAIN_CPU_CHUNK_TOKENS)
    if chunking is None:
        return [list(range(lo, hi))] if hi > lo else []
    local = plan_chunks(tokens.lengths[lo:hi], chunking.max_items, chunking.max_tokens)
    return [[lo + i for i in chunk] for chunk in local]


@dataclass
class _Pairs:
    """This rank's share of the batch's pairs (a `dualview.train.gradcache.ChunkedGroup`)."""

    model: TrainableReranker
    tokens: TokenizedTexts
    lo: int
    hi: int
    total: int
    chunks: list[list[int]]

    def feature_shape(self) -> tuple[int, ...]:
        return ()

    def forward(self, chunk: list[int]) -> torch.Tensor:
        """One relevance logit per pair of the chunk."""
        return self.model(**self.model.pad_pairs(self.tokens, chunk)).float()

    def chunk_tokens(self, chunk: list[int]) -> int:
        """The chunk's pairs x its padded width."""
        limit = getattr(self.model, "max_length", None)
        return len(chunk) * padded_width(int(self.tokens.lengths[chunk].max()), limit)


def rerank_step(
    model: TrainableReranker,
    loss_fn: Objective,
    batch: Batch,
    scale: float = 1.0,
    chunk_size: int | Chunking | None = None,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward,
) -> StepStats:
    """Accumulate ``scale`` x the gradient of the batch loss into ``model``'s parameters
    (``chunk_size`` as in `dualview.train.step.contrastive_step`)."""
    chunking = Chunking(max_items=chunk_size) if isinstance(chunk_size, int) else chunk_size
    tokens = pair_tokens(model, batch)
    rank, size = world()
    total = len(tokens)
    lo, hi = shard_bounds(total, size, rank)
    device = next(model.parameters()).device
    pairs = _Pairs(model, tokens, lo, hi, total, _chunks(tokens, lo, hi, chunking, device))
    loss = chunked_step(
        {GROUP: pairs},
        lambda scores: loss_fn.batch_loss(scores, batch),
        device,
        chunking,
        scale=scale,
        autocast=autocast,
        backward=backward,
    )
    return _stats(pairs, loss, batch, chunking)


def _stats(pairs: _Pairs, loss: torch.Tensor, batch: Batch, chunking: Chunking | None) -> StepStats:
    tokens = pairs.tokens
    padded = sum(pairs.chunk_tokens(chunk) for chunk in pairs.chunks)
    return StepStats(
        float(loss.detach()),
        len(batch.records),
        len(tokens),
        [int(v) for v in tokens.lengths[pairs.lo : pairs.hi]],
        padded,
        chunking is not None,
        rerun_lengths({GROUP: pairs}, chunking),
    )
