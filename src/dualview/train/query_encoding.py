"""How a batch's queries become embeddings under a model's instruction-query interaction.

The training step encodes text groups and hands the embeddings to the objective; what the
groups are depends on the model (``model.interaction``), and this module says it, so the
step has no branch on the interaction:

- ``concat``: each query joined with its instruction through the template is one text
  (``queries``; ``cross`` holds the B x B swapped joins when the objective needs them);
- ``cross_attention`` (InF-Embed Interaction II): each distinct instruction and bare query
  is encoded once as token states (``instructions``, ``query_tokens``) and the model's head
  forms every needed pair, giving ``queries`` (and ``cross``);
- ``instruction_attention`` (ours, `dualview.models.instruction_attention`): the concat
  groups plus the token states of the distinct instructions and bare queries; the head adds
  its gated term to each concatenation embedding (``queries``, and ``cross`` pair by pair).

A new interaction is one `QueryEncoding` subclass registered in `QUERY_ENCODINGS` (a
`dualview.registry.Registry`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import ClassVar

import torch

from dualview.models.bi_encoder import BiEncoder, TextKind
from dualview.models.interaction import pair_index
from dualview.registry import Registry
from dualview.train.batching import Batch

TextGroups = dict[str, tuple[list[str], TextKind]]


class QueryEncoding:
    """Text groups to encode for a batch, and the objective's embeddings made from them."""

    #: Groups encoded to token states [N, T, H] (with their masks) instead of vectors.
    state_groups: ClassVar[tuple[str, ...]] = ()

    def text_groups(self, batch: Batch, needs: Collection[str]) -> TextGroups:
        raise NotImplementedError

    def embeddings(
        self,
        model: BiEncoder,
        encoded: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor],
        batch: Batch,
        needs: Collection[str],
    ) -> dict[str, torch.Tensor]:
        """The objective's groups from the encoded ones (``masks`` of the state groups)."""
        return dict(encoded)


class ConcatQueries(QueryEncoding):
    """Query and instruction joined by the template: one text per record."""

    def text_groups(self, batch: Batch, needs: Collection[str]) -> TextGroups:
        groups: TextGroups = {
            "queries": (batch.query_texts, "query"),
            "documents": (batch.doc_texts, "document"),
        }
        if "cross" in needs:
            groups["cross"] = (batch.cross_query_texts(), "query")
        return groups


def batch_pairs(batch: Batch) -> tuple[list[str], list[str], torch.Tensor, torch.Tensor]:
    """Distinct instructions and bare queries of ``batch`` and each record's indices."""
    return pair_index([r.instruction for r in batch.records], [r.query for r in batch.records])


class CrossAttentionQueries(QueryEncoding):
    """Instruction and query encoded apart; the model's head joins every needed pair."""

    state_groups = ("instructions", "query_tokens")

    def text_groups(self, batch: Batch, needs: Collection[str]) -> TextGroups:
        instructions, queries, _, _ = batch_pairs(batch)
        return {
            "instructions": (instructions, "query"),
            "query_tokens": (queries, "query"),
            "documents": (batch.doc_texts, "document"),
        }

    def base(self, encoded: Mapping[str, torch.Tensor], group: str) -> torch.Tensor | None:
        """What the head adds to for ``group`` (none here: the head's output is the query)."""
        return None

    def embeddings(
        self,
        model: BiEncoder,
        encoded: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor],
        batch: Batch,
        needs: Collection[str],
    ) -> dict[str, torch.Tensor]:
        out = {k: v for k, v in encoded.items() if k not in self.state_groups}
        device = encoded["documents"].device
        _, _, inst_idx, query_idx = batch_pairs(batch)
        inst_idx, query_idx = inst_idx.to(device), query_idx.to(device)
        inst = (encoded["instructions"], masks["instructions"])
        queries = (encoded["query_tokens"], masks["query_tokens"])
        base = self.base(encoded, "queries")
        out["queries"] = model.finish(model.head.pairs(inst, queries, inst_idx, query_idx, base))
        if "cross" in needs:
            n = len(batch.records)  # row-major [i, j] = query of i with the instruction of j
            pairs = model.head.pairs(
                inst,
                queries,
                inst_idx.repeat(n),
                query_idx.repeat_interleave(n),
                self.base(encoded, "cross"),
            )
            out["cross"] = model.finish(pairs)
        return out


class InstructionAttentionQueries(CrossAttentionQueries):
    """The concatenation groups as well; the head adds its gated term to each of their
    embeddings (``queries``, ``cross``)."""

    def text_groups(self, batch: Batch, needs: Collection[str]) -> TextGroups:
        return {**ConcatQueries().text_groups(batch, needs), **super().text_groups(batch, needs)}

    def base(self, encoded: Mapping[str, torch.Tensor], group: str) -> torch.Tensor | None:
        return encoded[group]


#: ``model.interaction`` -> its query encoding; plugins: group ``dualview.query_encodings``.
QUERY_ENCODINGS: Registry[QueryEncoding] = Registry(
    "query encoding",
    field="model.interaction",
    group="dualview.query_encodings",
    entries={
        "concat": ConcatQueries(),
        "cross_attention": CrossAttentionQueries(),
        "instruction_attention": InstructionAttentionQueries(),
    },
)


def query_encoding(interaction: str) -> QueryEncoding:
    """The encoding of a model's ``interaction``."""
    return QUERY_ENCODINGS.get(interaction)
