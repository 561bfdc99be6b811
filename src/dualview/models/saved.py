"""The saved-folder format of a dualview model, and reading it back.

A saved model is a sentence-transformers folder (what `dualview.models.bi_encoder.BiEncoder.save`
writes) plus dualview's own files:

- ``dualview_model.json`` (`MODEL_INFO_FILE`): the query template, the document text rule and,
  for a model with an interaction head, ``"interaction"``: ``cross_attention`` (InF-Embed
  Interaction II) or ``instruction_attention`` (`dualview.models.instruction_attention`);
- ``interaction/`` (`dualview.models.interaction.HEAD_DIR`): the interaction head;
- ``lora_adapter/``: a LoRA adapter alone (`dualview.models.decoder`);
- ``dualview_train.yaml`` and ``data_manifest.json``: the training config and the mix manifest.

Readers ask this module what a folder holds (`model_info`, `load_interaction_head`,
`saved_kind`: the folder's `dualview.models.kinds.SavedKind`) instead of looking for file
names themselves; a folder that declares no kind in ``dualview_reranker.json`` is a
bi-encoder's (`BI_ENCODER`); `require_bi_encoder` refuses a reranker's folder (its
``dualview_reranker.json``, or sentence-transformers' ``model_type: CrossEncoder``) where a
bi-encoder is expected, instead of letting sentence-transformers read it as one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from dualview.errors import ConfigError
from dualview.io.files import read_json_file
from dualview.models.instruction_attention import InstructionAttention
from dualview.models.interaction import InstructionQueryAttention, has_head
from dualview.models.kinds import MODEL_KINDS, CardFacts, SavedKind
from dualview.models.reranker import RERANKER_FILE, reranker_kind
from dualview.registry import Registry

MODEL_INFO_FILE = "dualview_model.json"
TRAIN_CONFIG_FILE = "dualview_train.yaml"
TRAIN_MANIFEST_FILE = "data_manifest.json"
#: sentence-transformers' description of a saved folder; its ``model_type`` names a
#: ``CrossEncoder`` (any cross-encoder saved by sentence-transformers, ours or not).
ST_CONFIG_FILE = "config_sentence_transformers.json"


def _bi_encoder_lines(model: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    pooling, normalize = model.get("pooling", "-"), model.get("normalize", "-")
    return [f"- Pooling: {pooling}, normalized: {normalize}"]


#: ``model.kind: bi_encoder``: queries and documents embedded apart, saved as a
#: sentence-transformers folder (`dualview.models.bi_encoder.BiEncoder.save`).
BI_ENCODER = SavedKind(
    "bi_encoder",
    CardFacts(
        "A [sentence-transformers](https://www.sbert.net) bi-encoder",
        "sentence-similarity",
        ("sentence-transformers", "feature-extraction"),
        (
            "from sentence_transformers import SentenceTransformer",
            'model = SentenceTransformer("PATH_OR_REPO")',
            'q = model.encode_query(["what can replace eggs in baking? Only vegan answers."])',
            'd = model.encode_document(["Flax seeds mixed with water bind a batter."])',
            "print(model.similarity(q, d))",
        ),
    ),
    MODEL_INFO_FILE,
    card_lines=_bi_encoder_lines,
)


def saved_kind_name(folder: str | Path) -> str:
    """The kind of the model saved in ``folder``: the one its `RERANKER_FILE` declares,
    else ``bi_encoder`` (a sentence-transformers folder, a Hub name)."""
    return reranker_kind(folder) or BI_ENCODER.name


def saved_kind(folder: str | Path) -> SavedKind:
    """The `SavedKind` of ``folder`` (`saved_kind_name`); a declared kind that nobody
    registered is one located error naming the file."""
    where = f"{Path(folder) / RERANKER_FILE}: field 'kind'"
    return MODEL_KINDS.get(saved_kind_name(folder), where=where)


def model_info(folder: str | Path) -> dict[str, Any]:
    """The ``dualview_model.json`` of a saved folder (``{}`` for any other folder); one that
    is present but unreadable is a located `DataError`, never silently another model."""
    path = Path(folder) / MODEL_INFO_FILE
    if not path.is_file():
        return {}
    info = read_json_file(path)
    return info if isinstance(info, dict) else {}


def _json_field(path: Path, field: str) -> Any:
    """``field`` of the JSON object in ``path`` (None without the file or the field)."""
    info = read_json_file(path) if path.is_file() else None
    return info.get(field) if isinstance(info, dict) else None


def reranker_evidence(folder: Path) -> tuple[str, str] | None:
    """``(kind, why)`` when ``folder`` holds a reranker: its `RERANKER_FILE`, a
    sentence-transformers ``CrossEncoder`` (`ST_CONFIG_FILE`), or weights saved with a
    sequence-classification head (``config.json``); None for any other folder."""
    kind = reranker_kind(folder)
    if kind is not None:
        return kind, RERANKER_FILE
    if _json_field(folder / ST_CONFIG_FILE, "model_type") == "CrossEncoder":
        return "cross_encoder", f"{ST_CONFIG_FILE} says CrossEncoder"
    architectures = _json_field(folder / "config.json", "architectures")
    heads = [a for a in architectures or [] if str(a).endswith("ForSequenceClassification")]
    if heads:
        return "cross_encoder", f"config.json: weights of a {heads[0]}"
    return None


def require_bi_encoder(name: str | Path) -> None:
    """Refuse a folder that holds a reranker where a bi-encoder is expected (eval's MODEL,
    mine's ``model``), whatever other marker it has: sentence-transformers would read its
    backbone with mean pooling and score it as an embedding model. Hub names and other
    folders pass."""
    folder = Path(name)
    found = reranker_evidence(folder) if folder.is_dir() else None
    if found is not None:
        kind, why = found
        raise ConfigError(
            f"{folder}: holds a reranker (kind {kind}: {why}), not a bi-encoder; pass it "
            "to eval with --reranker, after a first-stage MODEL or with --first-stage bm25"
        )


def interaction_of(folder: str | Path) -> str:
    """How the saved model joins instruction and query: ``concat``, ``cross_attention`` or
    ``instruction_attention``."""
    declared = model_info(folder).get("interaction")
    if declared is None and has_head(folder):  # a head saved without its info file
        return "cross_attention"
    return str(declared or "concat")


#: The head class of each interaction that has one (``concat`` has none); plugins: entry-point
#: group ``dualview.interaction_heads``.
HeadClass = type[InstructionQueryAttention] | type[InstructionAttention]
INTERACTION_HEADS: Registry[HeadClass] = Registry(
    "interaction head",
    field="model.interaction",
    group="dualview.interaction_heads",
    entries={
        "cross_attention": InstructionQueryAttention,
        "instruction_attention": InstructionAttention,
    },
)


def head_class(interaction: str) -> HeadClass | None:
    """The head class of ``interaction``, or None for one that has no head (``concat``)."""
    return INTERACTION_HEADS.get(interaction) if interaction in INTERACTION_HEADS else None


def load_interaction_head(folder: str | Path) -> nn.Module | None:
    """The interaction head of a saved model, or None for a concatenation model."""
    head = head_class(interaction_of(folder))
    return None if head is None else head.load(folder)
