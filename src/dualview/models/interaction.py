"""InF-Embed Interaction II: instruction-query cross-attention.

The instruction and the query are encoded *separately* by the shared backbone (token states
``I`` [Ti, d] and ``Q`` [Tq, d]); the instruction-aware query is

.. math:: \\mathrm{pool}\\Big(\\mathrm{softmax}\\big((I W_i)(Q W_{q1})^\\top / \\sqrt{d}\\big)
          (Q W_{q2})\\Big)

with learnable :math:`W_i, W_{q1}, W_{q2} \\in \\mathbb{R}^{d \\times d}`, scored against
passages by cosine similarity (the bi-encoder L2-normalises it).

Token-level reading (the paper writes the formula for vectors):

- **the instruction is the sequence**: each instruction token attends over the query's
  tokens (rows of the [Ti, Tq] attention matrix are instruction tokens, the softmax runs over
  query tokens), so the result is one vector per instruction token, a mixture of the query's
  projected token states;
- **padding**: padded query tokens get zero attention (masked before the softmax); padded
  instruction tokens are excluded by the pooling;
- **pooling**: the model's own pooling (``mean``: masked mean over instruction tokens,
  ``cls``: the first, ``last_token``: the last real one), so a model keeps one pooling rule;
- **initialisation**: the three matrices start as the identity, so an untrained head returns
  an attention-weighted mean of the query's token states (close to the mean-pooled query).

A consequence of the formula: the output is always a combination of the *query's* token
states; the instruction only decides the weights. An instruction shared by many queries is
encoded once (`pair_index` de-duplicates texts in training, and evaluation encodes each
distinct instruction once per benchmark). `dualview.models.instruction_attention` is our
instruction-aware variant (beyond the paper), which shares the saved layout below.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_json_file
from dualview.models.pooling import pool

#: Sub-folder of a saved model that holds the head (config + weights).
HEAD_DIR = "interaction"
HEAD_CONFIG = "config.json"
HEAD_WEIGHTS = "head.pt"


class InstructionQueryAttention(nn.Module):
    r"""Cross-attention head of InF-Embed Interaction II (see the module docstring).

    ``forward(I, I_mask, Q, Q_mask)`` with token states ``I`` [N, Ti, d], ``Q`` [N, Tq, d] and
    0/1 masks ``I_mask`` [N, Ti], ``Q_mask`` [N, Tq] returns [N, d]: for pair n,

    .. math:: A_n = \mathrm{softmax}_{\text{query tokens}}\big((I_n W_i)(Q_n W_{q1})^\top /
              \sqrt{d}\big), \quad o_n = \mathrm{pool}_{I\_mask_n}(A_n Q_n W_{q2})

    (``x W`` is ``nn.Linear(d, d, bias=False)`` applied to row vectors). Not normalised: the
    bi-encoder normalises it like any other embedding.
    """

    #: Whether `pairs` adds to the concatenation embedding (``base``); this head does not.
    uses_base: bool = False

    def __init__(self, dim: int, pooling: str = "mean") -> None:
        super().__init__()
        self.dim = dim
        self.pooling = pooling
        self.instruction = nn.Linear(dim, dim, bias=False)  # W_i
        self.query_key = nn.Linear(dim, dim, bias=False)  # W_q1
        self.query_value = nn.Linear(dim, dim, bias=False)  # W_q2
        for layer in (self.instruction, self.query_key, self.query_value):
            nn.init.eye_(layer.weight)

    def forward(
        self,
        instruction: torch.Tensor,
        instruction_mask: torch.Tensor,
        query: torch.Tensor,
        query_mask: torch.Tensor,
    ) -> torch.Tensor:
        scores = self.instruction(instruction) @ self.query_key(query).transpose(1, 2)
        scores = scores / math.sqrt(self.dim)
        scores = scores.masked_fill(~query_mask.bool().unsqueeze(1), float("-inf"))
        mixed = torch.softmax(scores, dim=-1) @ self.query_value(query)
        return pool(mixed, instruction_mask, self.pooling)

    def pairs(
        self,
        instructions: tuple[torch.Tensor, torch.Tensor],
        queries: tuple[torch.Tensor, torch.Tensor],
        instruction_index: torch.Tensor,
        query_index: torch.Tensor,
        base: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Outputs [len(index), d] for pairs (instructions[i_k], queries[q_k]) of token states
        and masks given once per distinct text (``base``: unused, see `uses_base`)."""
        states, mask = instructions
        q_states, q_mask = queries
        return self(
            states[instruction_index],
            mask[instruction_index],
            q_states[query_index],
            q_mask[query_index],
        )

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/interaction/{config.json, head.pt}``; returns that sub-folder."""
        config = {"type": "cross_attention", "dim": self.dim, "pooling": self.pooling}
        return save_head(self, folder, config)

    @classmethod
    def load(cls, folder: str | Path) -> InstructionQueryAttention:
        """The head saved in ``folder/interaction/`` (see `save`)."""
        config, state = read_head(folder)
        head = cls(int(config["dim"]), str(config["pooling"]))
        head.load_state_dict(state)
        return head


def save_head(head: nn.Module, folder: str | Path, config: dict) -> Path:
    """Write a head's ``config`` and weights to ``folder/interaction/``; returns it."""
    out = Path(folder) / HEAD_DIR
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (HEAD_WEIGHTS + ".tmp")
    torch.save({k: v.detach().cpu() for k, v in head.state_dict().items()}, tmp)
    tmp.replace(out / HEAD_WEIGHTS)
    atomic_write_text(out / HEAD_CONFIG, json.dumps(config, indent=2))
    return out


def read_head(folder: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """The config and weights a head saved in ``folder/interaction/`` (see `save_head`)."""
    sub = Path(folder) / HEAD_DIR
    config = read_json_file(sub / HEAD_CONFIG)
    state = torch.load(sub / HEAD_WEIGHTS, map_location="cpu", weights_only=True)
    return config, state


def has_head(folder: str | Path) -> bool:
    """Whether a saved model folder carries an interaction head."""
    return (Path(folder) / HEAD_DIR / HEAD_CONFIG).is_file()


def pair_index(
    instructions: Sequence[str], queries: Sequence[str]
) -> tuple[list[str], list[str], torch.Tensor, torch.Tensor]:
    """Distinct instruction and query texts (first-seen order) and each pair's indices."""
    inst = list(dict.fromkeys(instructions))
    qs = list(dict.fromkeys(queries))
    inst_pos = {t: i for i, t in enumerate(inst)}
    q_pos = {t: i for i, t in enumerate(qs)}
    return (
        inst,
        qs,
        torch.tensor([inst_pos[t] for t in instructions], dtype=torch.long),
        torch.tensor([q_pos[t] for t in queries], dtype=torch.long),
    )


def _padded_states(
    st_model, texts: list[str], batch_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token states [N, T, d] (right padded) and masks [N, T] of ``texts`` read as queries."""
    parts = st_model.encode_query(
        texts, output_value="token_embeddings", batch_size=batch_size, convert_to_numpy=False
    )
    parts = [p.float().cpu() for p in parts]
    states = nn.utils.rnn.pad_sequence(parts, batch_first=True)
    lengths = torch.tensor([p.shape[0] for p in parts])
    mask = torch.arange(states.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    return states, mask.long()


@torch.no_grad()
def encode_instructed_queries(
    st_model,
    head: nn.Module,
    queries: Sequence[str],
    instructions: Sequence[str],
    batch_size: int = 32,
    normalize: bool = True,
    base: torch.Tensor | np.ndarray | None = None,
) -> torch.Tensor:
    """Instruction-aware query embeddings [len(queries), d] from a saved model.

    Needs only sentence-transformers (and torch): ``st_model`` is the saved folder loaded
    with ``SentenceTransformer(path)`` (its backbone, read as queries) and ``head`` is
    the head of the same folder (`dualview.models.saved.load_interaction_head`). Each
    distinct instruction and query is encoded once, whatever the number of pairs. A head
    that `uses_base` needs ``base``: the concatenation embeddings [len(queries), d] of the
    pairs (the folder's model on the joined texts).
    """
    if head.uses_base and (base is None or len(base) != len(queries)):
        raise ValueError("this interaction head needs the concatenation embeddings (base)")
    base = None if base is None else torch.as_tensor(base).float().cpu()
    inst_texts, query_texts, inst_idx, query_idx = pair_index(instructions, queries)
    head = head.eval().float().cpu()
    inst = _padded_states(st_model, inst_texts, batch_size)
    bare = _padded_states(st_model, query_texts, batch_size)
    out = torch.cat(
        [
            head.pairs(
                inst,
                bare,
                inst_idx[s : s + batch_size],
                query_idx[s : s + batch_size],
                base=None if base is None else base[s : s + batch_size],
            )
            for s in range(0, len(queries), batch_size)
        ]
        or [torch.empty(0, head.dim)]
    )
    return nn.functional.normalize(out, p=2, dim=-1) if normalize else out
