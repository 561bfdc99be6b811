"""The sentence-transformers model card of a saved dualview model (``MODEL/README.md``).

`render_model_card` reads what `dualview.models.bi_encoder.BiEncoder.save` leaves in
the folder (``dualview_train.yaml``, ``data_manifest.json``, ``dualview_model.json``) and,
when given, the result JSONs of ``dualview eval`` for the model, and writes:

- YAML metadata the Hub reads: ``library_name: sentence-transformers``, ``pipeline_tag``,
  ``base_model`` (when the backbone is a Hub name), ``license``, tags, and a ``model-index``
  with one result per benchmark (task, dataset, metrics);
- the base model, how to load and query it, the training config, the data manifest and an
  evaluation table (IR measures x100, p-MRR as is).

A reranker folder (`dualview.models.reranker.RERANKER_FILE`) gets the same card with what
its kind is and how to use it: a cross-encoder through sentence-transformers' ``CrossEncoder``,
an LLM reranker through `dualview.models.rerankers.load_reranker` (`Kind`).

The trainer writes the card on save (without evaluation); ``dualview model-card MODEL --eval
DIR`` rewrites it with the evaluation table and the model-index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dualview import __version__
from dualview.config import read_yaml
from dualview.errors import DataError
from dualview.eval.layout import display_value
from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_json_file
from dualview.models.reranker import RERANKER_FILE, reranker_kind

CARD_FILE = "README.md"

_DUAL_VIEW = (
    "for instruction-following retrieval: queries carry an instruction, and training on "
    "dual-view data (each instruction paired with a reversed one under which an instruction "
    "negative becomes the positive) teaches the model to read it."
)


@dataclass(frozen=True)
class Kind:
    """What the card says of one model kind: what it is, its Hub tags, how to use it."""

    what: str
    pipeline_tag: str
    tags: tuple[str, ...]
    usage: tuple[str, ...]
    library: str = "sentence-transformers"


_LOAD_RERANKER = (
    "from dualview.models.rerankers import load_reranker",
    'model = load_reranker("PATH")',
    'query, instruction = "what can replace eggs in baking?", "Only vegan answers."',
    'print(model.score([query], [instruction], ["Flax seeds bind a batter."]))',
)

KINDS = {
    "bi_encoder": Kind(
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
    "cross_encoder": Kind(
        "A [sentence-transformers](https://www.sbert.net) cross-encoder reranker",
        "text-ranking",
        ("sentence-transformers", "cross-encoder", "reranker"),
        (
            "from sentence_transformers import CrossEncoder",
            'model = CrossEncoder("PATH_OR_REPO")',
            'query = "what can replace eggs in baking? Only vegan answers."',
            'print(model.predict([(query, "Flax seeds mixed with water bind a batter.")]))',
        ),
    ),
    "llm_reranker": Kind(
        "An LLM reranker (a causal LM whose score is the log-odds of its two answer words "
        "after a relevance prompt; LoRA merged, adapter in `lora_adapter/`)",
        "text-ranking",
        ("reranker", "llm-reranker"),
        _LOAD_RERANKER,
        library="transformers",
    ),
    "reranker": Kind(  # a kind registered by other code: read through its registered loader
        "A dualview reranker", "text-ranking", ("reranker",), _LOAD_RERANKER, library="dualview"
    ),
}


def _present(path: Path) -> bool:
    """``path`` exists, or is a link (a broken or looping link is read, and reported)."""
    return path.is_symlink() or path.exists()


def _read_yaml(path: Path) -> dict[str, Any]:
    return read_yaml(path) if _present(path) else {}


def _read_json(path: Path) -> dict[str, Any]:
    data = read_json_file(path) if _present(path) else {}
    return data if isinstance(data, dict) else {}


def _is_result(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("metrics"), dict)
        and isinstance(data.get("benchmark"), dict)
    )


def eval_results(paths: list[Path]) -> list[dict[str, Any]]:
    """The ``dualview eval`` result JSONs under ``paths``, by label.

    A folder is searched for result JSONs (other JSON files in it are skipped); a file named
    on its own must be one, and a missing path is an error, never an empty table.
    """
    results = []
    for path in paths:
        if path.is_dir():
            found = [read_json_file(f) for f in sorted(path.rglob("*.json"))]
            if not any(_is_result(data) for data in found):
                raise DataError(path, None, "folder", "no dualview eval result JSON in it")
            results += [data for data in found if _is_result(data)]
            continue
        data = read_json_file(path)
        if not _is_result(data):
            raise DataError(path, None, "json", "not a dualview eval result (no metrics)")
        results.append(data)
    return sorted(results, key=lambda r: r["benchmark"].get("label", ""))


def model_index(name: str, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Hub's ``model-index`` block: one entry per benchmark, every scalar metric."""
    entries = []
    for result in results:
        bench = result["benchmark"]
        metrics = [
            {"type": metric, "value": round(display_value(metric, value), 4), "name": metric}
            for metric, value in result["metrics"].items()
            if isinstance(value, int | float)
        ]
        entries.append(
            {
                "task": {"type": "text-retrieval", "name": "Instruction-following retrieval"},
                "dataset": {
                    "type": bench.get("hub_dataset") or bench.get("label"),
                    "name": bench.get("name") or bench.get("label"),
                    "split": "test",
                },
                "metrics": metrics,
            }
        )
    return [{"name": name, "results": entries}] if entries else []


def _is_hub_name(name: str) -> bool:
    return "/" in name and not name.startswith(("/", ".", "~")) and not Path(name).exists()


def card_metadata(
    name: str,
    train: dict[str, Any],
    results: list[dict[str, Any]],
    license_id: str,
    kind: str = "bi_encoder",
) -> dict[str, Any]:
    """YAML header of the model card."""
    base = str((train.get("model") or {}).get("name_or_path", ""))
    about = KINDS[kind]
    meta: dict[str, Any] = {
        "library_name": about.library,
        "pipeline_tag": about.pipeline_tag,
        "license": license_id,
        "tags": [*about.tags, "dualview", "instruction-following-retrieval"],
    }
    if _is_hub_name(base):
        meta["base_model"] = base
    if index := model_index(name, results):
        meta["model-index"] = index
    return meta


def _eval_table(results: list[dict[str, Any]]) -> list[str]:
    if not results:
        return [
            "Not evaluated yet: `dualview eval MODEL -b ... --out DIR`, then "
            "`dualview model-card MODEL --eval DIR/<model>`."
        ]
    lines = ["| benchmark | metric | value |", "|---|---|---:|"]
    for result in results:
        label = result["benchmark"].get("label", "?")
        for metric, value in result["metrics"].items():
            if isinstance(value, int | float):
                lines.append(f"| {label} | {metric} | {display_value(metric, value):.2f} |")
    lines += ["", "IR measures are shown x100; p-MRR and accuracies as computed."]
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
) -> str:
    """The model card text for the saved model folder ``model_dir``."""
    model_dir = Path(model_dir)
    name = name or model_dir.resolve().parent.name or model_dir.name
    train = _read_yaml(model_dir / "dualview_train.yaml")
    manifest = _read_json(model_dir / "data_manifest.json")
    info = _read_json(model_dir / "dualview_model.json")
    results = eval_results(eval_paths or [])
    model = train.get("model") or {}
    kind = card_kind(model_dir)
    if kind != "bi_encoder":  # a reranker's description holds its template
        info = _read_json(model_dir / RERANKER_FILE)
    about = KINDS[kind]
    template = info.get("query_template", "{query} {instruction}")
    loss = train.get("loss") or {}
    body = [
        f"# {name}",
        "",
        f"{about.what} trained with dualview {__version__} {_DUAL_VIEW}",
        "",
        f"- Base model: `{model.get('name_or_path', 'unknown')}`",
        *_kind_lines(kind, model, info),
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
    meta = card_metadata(name, train, results, license_id, kind)
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    return f"---\n{header}---\n\n" + "\n".join(body) + "\n"


def card_kind(model_dir: Path) -> str:
    """The folder's model kind as the card describes it (``reranker``: a kind it does not know)."""
    kind = reranker_kind(model_dir)
    if kind is None:
        return "bi_encoder"
    return kind if kind in KINDS else "reranker"


def _kind_lines(kind: str, model: dict[str, Any], info: dict[str, Any]) -> list[str]:
    """The card's facts that depend on the model kind."""
    if kind == "llm_reranker":
        prompt = str(info.get("prompt", "-")).replace("\n", " / ")
        return [f"- Answers: {info.get('answers', '-')}; prompt: `{prompt}`"]
    if kind == "cross_encoder":
        return [f"- Pair length: {info.get('max_length', '-')} tokens"]
    if kind == "bi_encoder":
        pooling, normalize = model.get("pooling", "-"), model.get("normalize", "-")
        return [f"- Pooling: {pooling}, normalized: {normalize}"]
    return []


def write_model_card(
    model_dir: str | Path,
    eval_paths: list[Path] | None = None,
    name: str | None = None,
    license_id: str = "apache-2.0",
) -> Path:
    """Write ``MODEL/README.md`` (see `render_model_card`); returns its path."""
    model_dir = Path(model_dir)
    if not any((model_dir / name).is_file() for name in ("modules.json", "config.json")):
        raise DataError(model_dir, None, "model", "not a saved model folder (no modules.json)")
    target = model_dir / CARD_FILE
    atomic_write_text(target, render_model_card(model_dir, eval_paths, name, license_id))
    return target
