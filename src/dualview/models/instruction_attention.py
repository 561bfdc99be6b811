"""An instruction-aware interaction head: query tokens read the instruction (beyond the paper).

``model.interaction: instruction_attention``. Not in InF-Embed: our variant, made because
the paper's Eq. 4 (`dualview.models.interaction.InstructionQueryAttention`) takes its
*values* from the query's tokens, so the instruction only sets mixing weights and its content
cannot enter the embedding (docs/results.md measured p-MRR about 0 on the paired gold test).
Here the roles are swapped and the head is a residual on the concatenation model:

.. math:: A = \\mathrm{softmax}_{\\text{instruction tokens}}\\big((Q W_q)(I W_k)^\\top /
          \\sqrt{d}\\big), \\quad
          e = \\mathrm{norm}\\big(c + g \\cdot \\mathrm{pool}_{Q\\_mask}(A\\, I W_v)\\big)

- ``c``: the concatenation embedding, the backbone on the query joined with its instruction
  through the template (exactly what ``interaction: concat`` computes);
- ``Q`` [Tq, d], ``I`` [Ti, d]: token states of the bare query and the bare instruction,
  each encoded apart by the same backbone; each query token attends over the instruction's
  tokens (padded instruction tokens masked), so the **values come from the instruction**;
  the result is pooled over the query's tokens with the model's pooling;
- ``g``: a scalar gate that starts at **0**, so an untrained model *is* the concatenation
  model (same embeddings); ``W_q, W_k, W_v`` start as the identity.

With the gate at 0 the projections get no gradient at the first step; the gate does (its
gradient is the extra term's inner product with the loss gradient), and once it is non-zero
the projections train too. The head trains in its own optimizer group (``optim.head_lr``).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from dualview.models.interaction import read_head, save_head
from dualview.models.pooling import pool

HEAD_TYPE = "instruction_attention"


class InstructionAttention(nn.Module):
    """The gated instruction-reading head (see the module docstring)."""

    #: `pairs` adds to the concatenation embedding of each pair (``base``).
    uses_base: bool = True

    def __init__(self, dim: int, pooling: str = "mean") -> None:
        super().__init__()
        self.dim = dim
        self.pooling = pooling
        self.query = nn.Linear(dim, dim, bias=False)  # W_q, on the query's tokens
        self.key = nn.Linear(dim, dim, bias=False)  # W_k, on the instruction's tokens
        self.value = nn.Linear(dim, dim, bias=False)  # W_v, on the instruction's tokens
        for layer in (self.query, self.key, self.value):
            nn.init.eye_(layer.weight)
        self.gate = nn.Parameter(torch.zeros(()))

    def extra(
        self,
        instruction: torch.Tensor,
        instruction_mask: torch.Tensor,
        query: torch.Tensor,
        query_mask: torch.Tensor,
    ) -> torch.Tensor:
        """The instruction read by the query's tokens, pooled: [N, d] (before the gate)."""
        scores = self.query(query) @ self.key(instruction).transpose(1, 2) / math.sqrt(self.dim)
        scores = scores.masked_fill(~instruction_mask.bool().unsqueeze(1), float("-inf"))
        mixed = torch.softmax(scores, dim=-1) @ self.value(instruction)  # [N, Tq, d]
        return pool(mixed, query_mask, self.pooling)

    def forward(
        self,
        base: torch.Tensor,
        instruction: torch.Tensor,
        instruction_mask: torch.Tensor,
        query: torch.Tensor,
        query_mask: torch.Tensor,
    ) -> torch.Tensor:
        """``base + gate * extra`` [N, d] (not normalised: the bi-encoder normalises it)."""
        extra = self.extra(instruction, instruction_mask, query, query_mask)
        return base + self.gate * extra

    def pairs(
        self,
        instructions: tuple[torch.Tensor, torch.Tensor],
        queries: tuple[torch.Tensor, torch.Tensor],
        instruction_index: torch.Tensor,
        query_index: torch.Tensor,
        base: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Outputs [len(index), d] for pairs (instructions[i_k], queries[q_k]) of token states
        and masks given once per distinct text; ``base[k]`` is pair k's concatenation
        embedding."""
        if base is None:
            raise ValueError("instruction_attention needs each pair's concatenation embedding")
        states, mask = instructions
        q_states, q_mask = queries
        return self(
            base,
            states[instruction_index],
            mask[instruction_index],
            q_states[query_index],
            q_mask[query_index],
        )

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/interaction/{config.json, head.pt}``; returns that sub-folder."""
        return save_head(
            self, folder, {"type": HEAD_TYPE, "dim": self.dim, "pooling": self.pooling}
        )

    @classmethod
    def load(cls, folder: str | Path) -> InstructionAttention:
        """The head saved in ``folder/interaction/`` (see `save`)."""
        config, state = read_head(folder)
        head = cls(int(config["dim"]), str(config["pooling"]))
        head.load_state_dict(state)
        return head
