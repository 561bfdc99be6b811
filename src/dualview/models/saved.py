"""The saved-folder format of a dualview model, and reading it back.

A saved model is a sentence-transformers folder (what `dualview.models.bi_encoder.BiEncoder.save`
writes) plus dualview's own files:

- ``dualview_model.json`` (`MODEL_INFO_FILE`): the query template, the document text rule and,
  for a model with an interaction head, ``"interaction"``: ``cross_attention`` (InF-Embed
  Interaction II) or ``instruction_attention`` (`dualview.models.instruction_attention`);
- ``interaction/`` (`dualview.models.interaction.HEAD_DIR`): the interaction head;
- ``lora_adapter/``: a LoRA adapter alone (`dualview.models.decoder`);
- ``dualview_train.yaml`` and ``data_manifest.json``: the training config and the mix manifest.

Readers ask this module what a folder holds (`model_info`, `load_interaction_head`) instead
of looking for file names themselves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn

from dualview.models.instruction_attention import InstructionAttention
from dualview.models.interaction import InstructionQueryAttention, has_head

MODEL_INFO_FILE = "dualview_model.json"
TRAIN_CONFIG_FILE = "dualview_train.yaml"
TRAIN_MANIFEST_FILE = "data_manifest.json"


def model_info(folder: str | Path) -> dict[str, Any]:
    """The ``dualview_model.json`` of a saved folder (``{}`` for any other folder)."""
    path = Path(folder) / MODEL_INFO_FILE
    if not path.is_file():
        return {}
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def interaction_of(folder: str | Path) -> str:
    """How the saved model joins instruction and query: ``concat``, ``cross_attention`` or
    ``instruction_attention``."""
    declared = model_info(folder).get("interaction")
    if declared is None and has_head(folder):  # a head saved without its info file
        return "cross_attention"
    return str(declared or "concat")


#: The head class of each interaction that has one (``concat`` has none).
INTERACTION_HEADS: dict[str, type[InstructionQueryAttention] | type[InstructionAttention]] = {
    "cross_attention": InstructionQueryAttention,
    "instruction_attention": InstructionAttention,
}


def load_interaction_head(folder: str | Path) -> nn.Module | None:
    """The interaction head of a saved model, or None for a concatenation model."""
    head = INTERACTION_HEADS.get(interaction_of(folder))
    return None if head is None else head.load(folder)
