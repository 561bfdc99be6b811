"""Token ids of a list of texts, kept unpadded, padded per chunk on demand.

Training tokenizes each batch once (in a DataLoader worker, `dualview.train.loader`)
and pads only when a chunk is encoded, so that:

- the GradCache re-forward reads the same ids as the no-grad pass, without tokenizing twice;
- chunks of length-sorted texts are padded to their own longest text, not the batch's.

`TokenizedTexts` stores the ids of ``n`` texts as one flat ``int32`` tensor plus
lengths: cheap to send from a worker process (torch shares tensors through shared memory)
and cheap to pad with one gather.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import torch

from dualview.models.token_ids import pair_token_ids, token_ids

#: Padded lengths are rounded up to a multiple of this (tensor-core friendly shapes).
PAD_MULTIPLE = 8


def padded_width(longest: int, max_length: int | None = None, multiple: int = PAD_MULTIPLE) -> int:
    """``longest`` rounded up to ``multiple``, but never past ``max_length``.

    A large ``multiple`` (64, 128) buckets chunk widths into a few static shapes, which
    ``torch.compile`` can reuse instead of recompiling per width (``pad_multiple``)."""
    width = -(-longest // multiple) * multiple
    if max_length is not None and width > max_length:
        return max(longest, max_length)
    return width


@dataclass
class TokenizedTexts:
    """Unpadded token ids of ``len(lengths)`` texts, concatenated in ``ids``."""

    ids: torch.Tensor  # int32 [sum(lengths)]
    lengths: torch.Tensor  # int64 [n]

    @classmethod
    def from_lists(cls, sequences: Sequence[Sequence[int]]) -> TokenizedTexts:
        counts = [len(s) for s in sequences]
        flat = np.fromiter(chain.from_iterable(sequences), dtype=np.int32, count=sum(counts))
        return cls(torch.from_numpy(flat), torch.tensor(counts, dtype=torch.int64))

    @property
    def offsets(self) -> torch.Tensor:
        return torch.cumsum(self.lengths, 0) - self.lengths

    def __len__(self) -> int:
        return int(self.lengths.numel())

    def pad(
        self,
        indices: Sequence[int] | torch.Tensor,
        pad_id: int,
        left: bool = False,
        max_length: int | None = None,
        multiple: int = PAD_MULTIPLE,
    ) -> dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` [len(indices), L] of the chosen texts.

        ``L`` is the longest chosen text rounded up to ``multiple``, but never past
        ``max_length``. ``left`` pads on the left (decoders pooled on their last token).
        """
        index = torch.as_tensor(indices, dtype=torch.int64)
        lengths = self.lengths[index]
        width = padded_width(int(lengths.max()) if len(index) else 0, max_length, multiple)
        positions = torch.arange(width, dtype=torch.int64)
        shift = (width - lengths).unsqueeze(1) if left else torch.zeros_like(lengths).unsqueeze(1)
        within = positions.unsqueeze(0) - shift
        mask = (within >= 0) & (within < lengths.unsqueeze(1))
        source = (self.offsets[index].unsqueeze(1) + within.clamp(min=0)).clamp(
            max=max(int(self.ids.numel()) - 1, 0)
        )
        input_ids = self.ids.to(torch.int64)[source] if self.ids.numel() else source * 0
        input_ids = input_ids.masked_fill(~mask, pad_id)
        return {"input_ids": input_ids, "attention_mask": mask.to(torch.int64)}


@dataclass
class TokenizedPairs(TokenizedTexts):
    """Token ids of ``n`` text pairs (one sequence each), with the length of each pair's first
    segment, so that padding can rebuild the token types (0: first text, 1: second)."""

    first_lengths: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.int64))

    def pad(
        self,
        indices: Sequence[int] | torch.Tensor,
        pad_id: int,
        left: bool = False,
        max_length: int | None = None,
        multiple: int = PAD_MULTIPLE,
    ) -> dict[str, torch.Tensor]:
        """`TokenizedTexts.pad` plus ``token_type_ids`` (0 on padding)."""
        inputs = super().pad(indices, pad_id, left, max_length, multiple)
        mask = inputs["attention_mask"]
        first = self.first_lengths[torch.as_tensor(indices, dtype=torch.int64)]
        within = torch.cumsum(mask, 1) - 1  # index of each real token in its text
        inputs["token_type_ids"] = ((within >= first.unsqueeze(1)) & (mask > 0)).to(torch.int64)
        return inputs


def plan_chunks(
    lengths: Sequence[int] | torch.Tensor,
    max_items: int | None = None,
    max_tokens: int | None = None,
    multiple: int = PAD_MULTIPLE,
) -> list[list[int]]:
    """Split texts into chunks of similar length for encoding.

    Texts are sorted by length (longest first) and packed greedily: a chunk takes the next
    text while it holds at most ``max_items`` texts and ``items x longest <= max_tokens``
    (its padded size, the longest rounded up to ``multiple``). Every chunk holds at least
    one text. Returns index lists.
    """
    values = [int(v) for v in (lengths.tolist() if torch.is_tensor(lengths) else lengths)]
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    chunks: list[list[int]] = []
    current: list[int] = []
    for index in order:
        padded = padded_width(
            max(values[current[0]] if current else values[index], 1), None, multiple
        )
        full = (max_items is not None and len(current) >= max_items) or (
            max_tokens is not None and (len(current) + 1) * padded > max_tokens
        )
        if current and full:
            chunks.append(current)
            current = []
        current.append(index)
    if current:
        chunks.append(current)
    return chunks


def tokenize_texts(tokenizer, texts: list[str], max_length: int) -> TokenizedTexts:
    """Token ids of ``texts`` (special tokens added, truncated to ``max_length``), unpadded."""
    if not texts:
        return TokenizedTexts.from_lists([])
    return TokenizedTexts.from_lists(token_ids(tokenizer, texts, max_length))


def tokenize_pairs(
    tokenizer, firsts: list[str], seconds: list[str], max_length: int
) -> TokenizedPairs:
    """Token ids of each (first, second) pair, truncated ``longest_first`` to ``max_length``."""
    if not firsts:
        empty = TokenizedTexts.from_lists([])
        return TokenizedPairs(empty.ids, empty.lengths)
    ids, first_lengths = pair_token_ids(tokenizer, firsts, seconds, max_length)
    texts = TokenizedTexts.from_lists(ids)
    return TokenizedPairs(texts.ids, texts.lengths, torch.tensor(first_lengths, dtype=torch.int64))
