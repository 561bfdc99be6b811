"""The run-folder contract: the files an experiment run and a sweep leave, named once.

`dualview.pipeline` writes these folders; `dualview.report` and `dualview.review` read them.
Both import the names and formats from here, so neither layer reaches into the other:

```
RUN/stages.json                 stage name -> stage folder (relative to RUN)     STAGES_FILE
RUN/<eval stage>/configurations.json   models, loss logs of the eval stage      CONFIGURATIONS_FILE
SWEEP/sweep.json                the sweep's grid, seeds, control, run folders    SWEEP_MANIFEST
```

Paths inside a manifest are stored relative to the run folder when they lie inside it
(`manifest_path_text`) and resolved against it when read (`manifest_path`), so a run folder
can be moved and reported from any working directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field

from dualview.config import StrictModel, validate_config
from dualview.errors import DataError
from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_json_file

STAGES_FILE = "stages.json"
CONFIGURATIONS_FILE = "configurations.json"
SWEEP_MANIFEST = "sweep.json"


def is_run_dir(path: str | Path) -> bool:
    """Whether ``path`` is an experiment run folder (it has a stage index)."""
    return (Path(path) / STAGES_FILE).is_file()


def write_stage_index(run_dir: Path, outputs: dict[str, Path]) -> Path:
    """Write ``RUN/stages.json``: each stage's folder, relative to the run folder."""
    index = {name: str(path.relative_to(run_dir)) for name, path in outputs.items()}
    path = run_dir / STAGES_FILE
    atomic_write_text(path, json.dumps(index, indent=2))
    return path


def read_stage_index(run_dir: Path) -> dict[str, str]:
    """``RUN/stages.json``; a folder without one, or a damaged one, is a located error."""
    path = run_dir / STAGES_FILE
    if not path.is_file():
        raise DataError(run_dir, None, STAGES_FILE, f"not a dualview run folder (no {STAGES_FILE})")
    index = read_json_file(path)
    if not isinstance(index, dict) or not all(isinstance(v, str) for v in index.values()):
        raise DataError(path, None, "json", "expected an object of stage folder names")
    return index


def manifest_path_text(path: Path, run_dir: Path) -> str:
    """How a run manifest stores ``path``: relative to the run folder when inside it (the
    run folder can be moved, and read from any folder), else absolute."""
    try:
        return str(Path(path).relative_to(run_dir))
    except ValueError:
        return str(Path(path).absolute())


def manifest_path(text: str, run_dir: Path) -> Path:
    """A path a run manifest stores, resolved against the run folder: a path relative to it
    (`manifest_path_text`), or one a run folder made before that stored (relative to the
    folder the run was started from, ``runs/demo/train-<key>/train_log.jsonl``, or
    absolute): the existing one of ``text`` itself when absolute, then ``run_dir`` joined
    with ``text`` and with each shorter tail of it. None existing: ``run_dir / text``."""
    path = Path(text)
    if path.is_absolute() and path.exists():
        return path
    parts = path.parts[1:] if path.is_absolute() else path.parts
    for start in range(len(parts)):
        candidate = run_dir.joinpath(*parts[start:])
        if candidate.exists():
            return candidate
    return path if path.is_absolute() else run_dir / path


class SweepArm(StrictModel):
    """One grid point: its label, its settings (key path -> value) and its run per seed."""

    label: str
    settings: dict[str, Any] = Field(default_factory=dict)
    runs: dict[str, str] = Field(default_factory=dict, description="seed (or -) -> run folder")


class SweepManifest(StrictModel):
    """What `dualview.pipeline.sweep` writes: the grid, the seeds and the control."""

    name: str
    method: str = "grid"
    parameters: dict[str, list[Any]] = Field(default_factory=dict)
    groups: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=list)
    control: str | None = None
    # the validation column each configuration's arm is chosen on (None: nothing chosen)
    select: str | None = None
    arms: list[SweepArm] = Field(min_length=1)


def is_sweep_dir(path: str | Path) -> bool:
    """Whether ``path`` is a sweep folder (it has a sweep manifest)."""
    return (Path(path) / SWEEP_MANIFEST).is_file()


def read_sweep_manifest(sweep_dir: str | Path) -> SweepManifest:
    """``SWEEP/sweep.json``, validated (a located error when it does not match)."""
    path = Path(sweep_dir) / SWEEP_MANIFEST
    return validate_config(SweepManifest, read_json_file(path), str(path))


def write_sweep_manifest(sweep_dir: str | Path, manifest: SweepManifest) -> Path:
    """Write ``SWEEP/sweep.json`` atomically."""
    path = Path(sweep_dir) / SWEEP_MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    data = manifest.model_dump(exclude={"select"} if manifest.select is None else None)
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")
    return path
