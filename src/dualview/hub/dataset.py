"""``dualview export --to hub-dataset OUT``: a Hub dataset repository folder with its card.

Layout (what ``datasets.load_dataset(OUT)`` and the Hub read)::

    OUT/README.md            dataset card: YAML metadata (license, task, configs, size) + text
    OUT/data/train.parquet   the records, full schema (meta as JSON text)
    OUT/provenance.json      manifest, LLM stages, review: the card's facts, machine-readable

The YAML ``configs`` block names the Parquet file as the ``train`` split, so loading needs no
script. The card states the source data, the LLM and its sampling, prompt template hashes,
parser versions, verification swap accuracy, the human-review accuracy with its confidence
interval when given, the mix manifest and the license.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from dualview import __version__
from dualview.data.export import ExportResult
from dualview.data.formats import parquet
from dualview.data.jsonl import iter_records
from dualview.hub.provenance import collect
from dualview.io.atomic import atomic_write_json, atomic_write_text
from dualview.io.folder import atomic_dir

DATA_FILE = "data/train.parquet"


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` bucket for ``n`` rows."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return name
    return "100K<n<1M" if n < 1_000_000 else "n>1M"


def card_metadata(rows: int, license_id: str, pretty_name: str) -> dict[str, Any]:
    """The YAML header of the dataset card."""
    return {
        "license": license_id,
        "pretty_name": pretty_name,
        "task_categories": ["text-retrieval"],
        "task_ids": ["document-retrieval"],
        "language": ["en"],
        "size_categories": [size_category(rows)],
        "tags": ["dualview", "instruction-following-retrieval", "dual-view"],
        "configs": [
            {"config_name": "default", "data_files": [{"split": "train", "path": DATA_FILE}]}
        ],
    }


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "-" if value is None else str(value)


def _llm_section(stages: list[dict[str, Any]]) -> list[str]:
    if not stages:
        return ["No LLM stage stats were found beside the sources (hand-made or converted data)."]
    lines = [
        "| file | task | model | sampling | template sha256 | parser | outcomes | summary |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for st in stages:
        fp = st.get("task_fingerprint") or {}
        sampling = st.get("sampling") or {}
        shown = {
            k: sampling[k] for k in ("temperature", "top_p", "max_tokens", "seed") if k in sampling
        }
        lines.append(
            f"| {st['file']} | {_fmt(st.get('task'))} | `{_fmt(st.get('model'))}` "
            f"| {json.dumps(shown) if shown else '-'} | `{_fmt(fp.get('template'))[:16]}` "
            f"| {_fmt(fp.get('parser_version', 1 if fp else None))} "
            f"| {json.dumps(st.get('outcomes') or {})} | {json.dumps(st.get('summary') or {})} |"
        )
    swaps = [
        s["summary"]["swap_accuracy"]
        for s in stages
        if (s.get("summary") or {}).get("swap_accuracy") is not None
    ]
    if swaps:
        lines += ["", f"Verification swap accuracy: {', '.join(f'{v:.4f}' for v in swaps)}."]
    return lines


def _review_section(review: dict[str, Any] | None) -> list[str]:
    if review is None:
        return ["No human review was given (`--review`)."]
    ci = ""
    if review.get("ci_low") is not None and review.get("ci_high") is not None:
        ci = f" (95% CI {review['ci_low']:.3f}-{review['ci_high']:.3f})"
    n = f" over {review['n']} judged records" if review.get("n") is not None else ""
    return [f"Human-review accuracy: {review['accuracy']:.3f}{ci}{n}."]


def _manifest_section(manifest: dict[str, Any] | None) -> list[str]:
    if manifest is None:
        return ["No mix manifest beside the source file."]
    head = {k: manifest.get(k) for k in ("kind", "name", "seed", "size", "counts") if k in manifest}
    lines = [f"Mix: `{json.dumps(head)}`", "", "| source | sha256 | records |", "|---|---|---:|"]
    for src in manifest.get("sources", []):
        lines.append(
            f"| {Path(src['path']).name} | `{src['sha256'][:16]}` | {src.get('records', '-')} |"
        )
    lines += ["", "The full manifest is in `provenance.json`."]
    return lines


def render_card(meta: dict[str, Any], views: Counter[str], provenance: dict[str, Any]) -> str:
    """The dataset card (Markdown with a YAML header)."""
    counts = ", ".join(f"{n:,} `{v}`" for v, n in sorted(views.items()))
    body = [
        f"# {meta['pretty_name']}",
        "",
        "Instruction-following retrieval training data made with "
        f"[dualview](https://pypi.org/project/dualview/) {__version__}. Each row is a record: "
        "`query`, `instruction`, `positives`, `instruction_negatives`, `hard_negatives` "
        "(documents `{id, title, text}`), `view` (`orig`, `dv` = the dual view, whose "
        "instruction was reversed so that an instruction negative became the positive, "
        "`plain`), `parent_id` (the `orig` record of a `dv` record) and `meta` (JSON text).",
        "",
        f"Rows: {sum(views.values()):,} ({counts}).",
        "",
        "```python",
        "from datasets import load_dataset",
        'ds = load_dataset("PATH_OR_REPO", split="train")',
        "```",
        "",
        "## Source data and mix",
        "",
        *_manifest_section(provenance["manifest"]),
        "",
        "## LLM synthesis and verification",
        "",
        *_llm_section(provenance["llm_stages"]),
        "",
        "## Human review",
        "",
        *_review_section(provenance["review"]),
        "",
        "## License",
        "",
        f"`{meta['license']}`. Records inherit the terms of their source passages and queries "
        "(listed above); check them before redistribution.",
    ]
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    return f"---\n{header}---\n\n" + "\n".join(body) + "\n"


def export_hub_dataset(
    source: str | Path,
    out: str | Path,
    license_id: str = "unknown",
    pretty_name: str | None = None,
    review: str | Path | None = None,
) -> ExportResult:
    """Write the Hub dataset folder ``out`` for the records JSONL ``source``."""
    source, out = Path(source), Path(out)
    provenance = collect(source, review)
    views: Counter[str] = Counter(r.view for r in iter_records(source))
    with atomic_dir(out) as tmp:  # the previous export stays whole until this one is
        rows = parquet.write(iter_records(source), tmp / DATA_FILE)
        name = (provenance["manifest"] or {}).get("name") or source.stem
        meta = card_metadata(rows, license_id, pretty_name or f"dualview {name}")
        atomic_write_json(tmp / "provenance.json", provenance)
        atomic_write_text(tmp / "README.md", render_card(meta, views, provenance))
    return ExportResult(out, rows)
