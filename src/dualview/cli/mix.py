"""``dualview mix``, ``dualview mine``, ``dualview export``: assemble the training set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualview.cli.options import Device, Devices, Limit, Precision, split_devices
from dualview.config import apply_overrides, read_yaml, validate_config
from dualview.data.export import EXPORT_FORMATS, export
from dualview.data.manifest import manifest_path
from dualview.data.mix import PRESETS, MixConfig, build_mix, preset_config
from dualview.errors import ConfigError
from dualview.io.paths import check_outputs

console = Console(stderr=True)

Overrides = Annotated[
    list[str] | None, typer.Option("--set", help="Override a config key: a.b=value (repeat).")
]


def register(app: typer.Typer) -> None:
    app.command("mix")(mix)
    app.command("mine")(mine)
    app.command("export")(export_cmd)


def _mix_config(
    preset: str | None, config: Path | None, size: int | None, seed: int | None, sets: list[str]
) -> MixConfig:
    if (preset is None) == (config is None):
        raise ConfigError("give exactly one of --preset NAME or --config MIX.yaml")
    if preset is not None:
        if size is None:
            raise ConfigError("--preset needs --size N (total records)")
        data = preset_config(preset, size, seed or 0).model_dump(mode="json")
        source = f"preset {preset}"
    else:
        assert config is not None
        data, source = read_yaml(config), str(config)
        data.update({k: v for k, v in (("size", size), ("seed", seed)) if v is not None})
    return validate_config(MixConfig, apply_overrides(data, sets), source)


def mix(
    inputs: Annotated[list[Path], typer.Argument(help="Record files (orig, dv, plain; JSONL).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Training file to write (JSONL).")],
    preset: Annotated[
        str | None, typer.Option(help=f"Paper configuration: {', '.join(PRESETS)}.")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="Custom mix YAML (MixConfig).")] = None,
    size: Annotated[int | None, typer.Option(help="Total records N.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default 0).")] = None,
    extra_dv: Annotated[
        str | None,
        typer.Option(
            "--extra-dv",
            help="Two dv records for one orig: error (default, names both lines), first, last.",
        ),
    ] = None,
    sets: Overrides = None,
) -> None:
    """Build a size-matched training mix with negatives selected, plus OUT.manifest.json."""
    overrides = [*(sets or []), *([f"extra_dv={extra_dv}"] if extra_dv else [])]
    mix_config = _mix_config(preset, config, size, seed, overrides)
    check_outputs([out, manifest_path(out)], [*inputs, config])
    result = build_mix(inputs, mix_config, out)
    counts = ", ".join(f"{v} {n:,}" for v, n in result.counts.items())
    neg = result.selection.to_dict()
    console.print(f"wrote {sum(result.counts.values()):,} records to {out} ({counts})")
    console.print(
        f"negatives: short {neg['short']}, dropped {neg['dropped']}, padded "
        f"{neg['padded_records']} ({neg['padded_documents']} docs), known positives removed "
        f"{neg['known_positives_removed']}; manifest {out}.manifest.json"
    )


def mine(
    records: Annotated[Path, typer.Argument(help="Record file (JSONL) to mine negatives for.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output record file (JSONL).")],
    corpus: Annotated[
        Path | None, typer.Option(help="BEIR folder or corpus.jsonl (default: the records' docs).")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="Mining YAML (MineConfig).")] = None,
    model: Annotated[str | None, typer.Option(help="sentence-transformers model.")] = None,
    precision: Precision = None,
    device: Device = None,
    devices: Devices = None,
    limit: Limit = None,
    sets: Overrides = None,
) -> None:
    """Mine hard negatives with false-negative protection; writes OUT and OUT.manifest.json."""
    from dualview.retrieval.mine import MineConfig, mine_file

    data = read_yaml(config) if config else {}
    if model:
        data["model"] = model
    if precision:
        data["precision"] = precision
    if device:
        data["device"] = device
    if split_devices(devices):
        data["devices"] = split_devices(devices)
    mine_config = validate_config(
        MineConfig, apply_overrides(data, sets or []), str(config or "mine options")
    )
    check_outputs([out, manifest_path(out)], [records, manifest_path(records), corpus, config])
    result = mine_file(records, out, mine_config, corpus=corpus, limit=limit)
    console.print(json.dumps(result.stats, indent=2))
    console.print(f"wrote {result.records:,} records to {out}; manifest {out}.manifest.json")


def export_cmd(
    source: Annotated[Path, typer.Argument(help="Training file (records JSONL).")],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output file (Parquet) or folder (hf, hf-st)."),
    ],
    to: Annotated[
        str, typer.Option("--to", help=f"One of {', '.join(EXPORT_FORMATS)}, hub-dataset.")
    ] = "parquet",
    negatives: Annotated[
        int | None, typer.Option(help="st formats: negative columns (default: file minimum).")
    ] = None,
    license_id: Annotated[
        str, typer.Option("--license", help="hub-dataset: the card's license id.")
    ] = "unknown",
    review: Annotated[
        Path | None,
        typer.Option(help="hub-dataset: human-review summary (JSON) or review folder."),
    ] = None,
) -> None:
    """Export a training file as Parquet, HF datasets, ST columns, or a Hub dataset folder."""
    written = [out, manifest_path(out)] if to in ("parquet", "st-parquet") else [out]
    check_outputs(written, [source, manifest_path(source), review])
    if to == "hub-dataset":
        from dualview.hub.dataset import export_hub_dataset

        result = export_hub_dataset(source, out, license_id=license_id, review=review)
        console.print(f"wrote {result.rows:,} rows and a dataset card to {result.path}")
        return
    result = export(source, out, to, negatives)
    extra = f", {result.negative_columns} negative columns" if result.negative_columns else ""
    skipped = f", {result.skipped} skipped (too few negatives)" if result.skipped else ""
    console.print(f"wrote {result.rows:,} rows to {result.path}{extra}{skipped}")
