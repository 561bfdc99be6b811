"""The sentence-transformers model card of a saved dualview model (``MODEL/README.md``).

`render_model_card` reads what `dualview.models.bi_encoder.BiEncoder.save` leaves in
the folder (``dualview_train.yaml``, ``data_manifest.json``, ``dualview_model.json``) and,
when given, the result JSONs of ``dualview eval`` for the model, and writes:

- YAML metadata the Hub reads: ``library_name``, ``pipeline_tag``, ``base_model`` (a Hub
  id: a Hub name as given, ``embedded:minilm`` as the repository it copies, nothing for a
  local folder), ``license``, tags, and a ``model-index`` named after the model
  (`default_name`) with one entry per Hub dataset the results were read from (local sets
  have no dataset id and stay out of it) and mteb's metric keys
  (`dualview.hub.card_results`);
- the base model, how to load and query it, the training config, the data manifest and an
  evaluation table (every value in points, x100, said once: `SCALE`).

Results must be the model's own: each result's recorded fingerprint is checked against the
folder's (`dualview.hub.card_results.check_results`); another model's result is an error,
or, with ``allow_other_model_results``, shown under a warning and kept out of the
model-index.

Each model kind says what it is, how to use it and its own facts on the card (its
`dualview.models.kinds.SavedKind`: ``card``, ``card_lines``, ``description_file``): a
bi-encoder through sentence-transformers' ``SentenceTransformer``, a cross-encoder through
its ``CrossEncoder``, an LLM reranker through `dualview.models.rerankers.load_reranker`.

The trainer writes the card on save (without evaluation); ``dualview model-card MODEL --eval
DIR`` rewrites it with the evaluation table and the model-index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub.utils import HFValidationError, validate_repo_id

from dualview import __version__
from dualview.config import read_yaml
from dualview.errors import DataError, DualviewError
from dualview.eval.layout import display_value
from dualview.hub.card_results import (
    CardResult,
    check_results,
    eval_results,
    identity_of,
    index_entries,
)
from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_json_file
from dualview.models.kinds import LOAD_RERANKER_USAGE, MODEL_KINDS, CardFacts, SavedKind
from dualview.models.reranker import RERANKER_FILE, load_reranker
from dualview.models.saved import BI_ENCODER, saved_kind_name
from dualview.resources import resolve_model_path

CARD_FILE = "README.md"
#: The Hub repository the embedded encoder (``embedded:minilm``) is a copy of.
EMBEDDED_ENCODER_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"

_DUAL_VIEW = (
    "for instruction-following retrieval: queries carry an instruction, and training on "
    "dual-view data (each instruction paired with a reversed one under which an instruction "
    "negative becomes the positive) teaches the model to read it."
)


#: The card of a reranker whose kind is not registered here (a folder another install
#: wrote): what every reranker is, read through its registered loader.
OTHER_RERANKER = CardFacts(
    "A dualview reranker", "text-ranking", ("reranker",), LOAD_RERANKER_USAGE, library="dualview"
)


def _present(path: Path) -> bool:
    """``path`` exists, or is a link (a broken or looping link is read, and reported)."""
    return path.is_symlink() or path.exists()


def _read_yaml(path: Path) -> dict[str, Any]:
    return read_yaml(path) if _present(path) else {}


def _read_json(path: Path) -> dict[str, Any]:
    data = read_json_file(path) if _present(path) else {}
    return data if isinstance(data, dict) else {}


def model_index(name: str, results: list[CardResult]) -> list[dict[str, Any]]:
    """The Hub's ``model-index`` block: each result's entries on Hub datasets
    (`dualview.hub.card_results.index_entries`); none when no result has one."""
    entries = [entry for result in results for entry in index_entries(result)]
    return [{"name": name, "results": entries}] if entries else []


def base_model_id(name_or_path: str) -> str | None:
    """The Hub id a card's ``base_model`` names: the embedded encoder's own repository, a
    Hub name as it is; None for a local folder or anything else the Hub would not know."""
    try:
        embedded = resolve_model_path(name_or_path) != name_or_path
    except DualviewError:  # an embedded name whose package is not installed
        embedded = True
    if embedded:
        return EMBEDDED_ENCODER_HUB_ID
    if "/" not in name_or_path or name_or_path.startswith(("/", ".", "~")):
        return None
    try:
        validate_repo_id(name_or_path)
    except HFValidationError:
        return None
    return None if Path(name_or_path).exists() else name_or_path


def default_name(model_dir: Path, train: dict[str, Any]) -> str:
    """The model's name: its folder's own, or, for a folder its training run saved
    (``OUTPUT_DIR/model``, as its ``dualview_train.yaml`` records), the run's."""
    folder = model_dir.resolve()
    run = Path(str(train.get("output_dir") or "")).name
    if run and folder.parent.name == run:
        return run
    return folder.name or str(model_dir)


def card_metadata(
    name: str,
    train: dict[str, Any],
    results: list[CardResult],
    license_id: str,
    about: CardFacts = BI_ENCODER.card,
) -> dict[str, Any]:
    """YAML header of the model card (``about``: what the model's kind says of itself)."""
    meta: dict[str, Any] = {
        "library_name": about.library,
        "pipeline_tag": about.pipeline_tag,
        "license": license_id,
        "tags": [*about.tags, "dualview", "instruction-following-retrieval"],
    }
    if base := base_model_id(str((train.get("model") or {}).get("name_or_path", ""))):
        meta["base_model"] = base
    if index := model_index(name, results):
        meta["model-index"] = index
    return meta


#: What every value of the evaluation table (and of the model-index) is, said once.
SCALE = (
    "All values are in points (x100), as mteb's model cards give them: IR measures (nDCG, "
    "MAP, recall, MRR; fractions as computed) x100, pairwise accuracy in percent, and p-MRR "
    "on the -100..100 scale it is computed at."
)


def _other_model_lines(results: list[CardResult]) -> list[str]:
    others = [r for r in results if r.other_model is not None]
    if not others:
        return []
    lines = ["> **Warning: results of another model.** Shown on request "]
    lines[0] += "(`--allow-other-model-results`), marked `*`, and left out of the model-index:"
    lines += [f"> - `{r.path}`: {r.other_model}" for r in others]
    return [*lines, ""]


def _stage_lines(results: list[CardResult]) -> list[str]:
    """What each reranked result reranked (its first stage and ``k``)."""
    lines = []
    for result in results:
        rerank = result.data.get("rerank")
        first = rerank.get("first_stage") if isinstance(rerank, dict) else None
        if isinstance(first, dict):
            top = rerank.get("top_k")
            span = f"the top {top} of" if top else "the candidates of"
            lines.append(f"- `{result.label}`: reranks {span} `{first.get('name', '?')}`")
    return [*lines, ""] if lines else []


def _eval_table(results: list[CardResult]) -> list[str]:
    if not results:
        return [
            "Not evaluated yet: `dualview eval MODEL -b ... --out DIR`, then "
            "`dualview model-card MODEL --eval DIR/<model>`."
        ]
    lines = [*_other_model_lines(results), *_stage_lines(results)]
    lines += ["| benchmark | metric | value |", "|---|---|---:|"]
    for result in results:
        label = result.label + (" *" if result.other_model is not None else "")
        for metric, value in result.metrics.items():
            lines.append(f"| {label} | {metric} | {display_value(metric, value):.2f} |")
    lines += ["", SCALE]
    if any(not index_entries(r) and r.other_model is None for r in results):
        lines.append(
            "Results on local data (not read from a Hub dataset) are in this table only: "
            "the Hub's model-index needs a dataset id."
        )
    return lines


def _manifest_lines(manifest: dict[str, Any]) -> list[str]:
    if not manifest:
        return ["No data manifest was saved with the model."]
    head = {k: manifest.get(k) for k in ("kind", "name", "seed", "size", "counts") if k in manifest}
    lines = [f"`{json.dumps(head)}`", ""]
    sources = manifest.get("sources")
    for src in sources if isinstance(sources, list) else []:
        if isinstance(src, dict) and isinstance(src.get("path"), str):
            lines.append(f"- `{Path(src['path']).name}` sha256 `{str(src.get('sha256'))[:16]}`")
        else:  # not a manifest dualview wrote: shown as it is
            lines.append(f"- `{json.dumps(src)[:200]}`")
    return lines


def render_model_card(
    model_dir: str | Path,
    eval_paths: list[Path] | None = None,
    name: str | None = None,
    license_id: str = "apache-2.0",
    allow_other_model_results: bool = False,
) -> str:
    """The model card text for the saved model folder ``model_dir``.

    Every result under ``eval_paths`` must be this model's (its recorded fingerprint, see
    `dualview.hub.card_results.check_results`); ``allow_other_model_results`` shows another
    model's results marked as such, outside the model-index.
    """
    model_dir = Path(model_dir)
    train = _read_yaml(model_dir / "dualview_train.yaml")
    name = name or default_name(model_dir, train)
    manifest = _read_json(model_dir / "data_manifest.json")
    model = train.get("model") or {}
    kind = card_kind(model_dir)
    identity = identity_of(model_dir, kind)
    results = check_results(eval_results(eval_paths or []), identity, allow_other_model_results)
    info = _read_json(model_dir / kind.description_file)  # the model's template and facts
    about = kind.card
    template = info.get("query_template", "{query} {instruction}")
    loss = train.get("loss") or {}
    body = [
        f"# {name}",
        "",
        f"{about.what} trained with dualview {__version__} {_DUAL_VIEW}",
        "",
        _base_line(str(model.get("name_or_path", "unknown"))),
        *kind.card_lines(model, info),
        f"- Loss: {loss.get('objective', '-')} (temperature {loss.get('temperature', '-')})",
        f"- Query text: `{template}`; document text: `title + ' ' + text`",
        "",
        "## Usage",
        "",
        "```python",
        *about.usage,
        "```",
        "",
        "## Evaluation",
        "",
        *_eval_table(results),
        "",
        "## Training data",
        "",
        *_manifest_lines(manifest),
        "",
        "## Training configuration",
        "",
        "```yaml",
        yaml.safe_dump(train, sort_keys=False).rstrip() if train else "# not recorded",
        "```",
    ]
    meta = card_metadata(name, train, results, license_id, about)
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    return f"---\n{header}---\n\n" + "\n".join(body) + "\n"


def _base_line(base: str) -> str:
    hub_id = base_model_id(base)
    shown = f" ({hub_id} on the Hub)" if hub_id not in (None, base) else ""
    return f"- Base model: `{base}`{shown}"


def card_kind(model_dir: Path) -> SavedKind:
    """The folder's kind (`dualview.models.saved.saved_kind`); a reranker kind that is not
    registered here gets the card of any reranker (`OTHER_RERANKER`)."""
    name = saved_kind_name(model_dir)
    if name in MODEL_KINDS:
        return MODEL_KINDS.get(name)
    return SavedKind(name, OTHER_RERANKER, RERANKER_FILE, load=load_reranker)


def write_model_card(
    model_dir: str | Path,
    eval_paths: list[Path] | None = None,
    name: str | None = None,
    license_id: str = "apache-2.0",
    allow_other_model_results: bool = False,
) -> Path:
    """Write ``MODEL/README.md`` (see `render_model_card`); returns its path."""
    model_dir = Path(model_dir)
    if not any((model_dir / name).is_file() for name in ("modules.json", "config.json")):
        raise DataError(model_dir, None, "model", "not a saved model folder (no modules.json)")
    target = model_dir / CARD_FILE
    card = render_model_card(model_dir, eval_paths, name, license_id, allow_other_model_results)
    atomic_write_text(target, card)
    return target
