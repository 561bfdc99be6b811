"""Cached, resumable stage execution.

A `Stage` is a named step with its ``params`` (a frozen `StageParams` model; see there),
input files and upstream stages. Its **key** hashes the params' key form, the content of
its input files (not their paths: a project moved to another folder, or the bundled gold
set read from an installed wheel instead of a checkout, keeps its keys) and the keys of its
upstream stages, so the output folder ``RUN_DIR/<name>-<key12>/`` changes exactly when
something the stage depends on changes:

- a finished stage (``.done.json`` present, same key) is skipped on rerun;
- an unfinished one (folder present, no ``.done.json``) is re-entered in the same folder, and
  the stage's own resume logic (the synthesis cache, the trainer's checkpoints) continues it;
- a change to one stage changes its key and the keys of everything downstream, and nothing
  upstream;
- with ``reuse_from`` (other run folders), a stage missing here whose finished folder with
  the same name and key exists there is copied instead of run: a seed sweep reuses the
  seed-independent LLM stages of its first run (the key proves the output is the same).

Run folders written before the keys ignored input paths (their keys also hashed each input's
path, `path_keyed_stage_key`) are still found: a stage with no folder under its key uses the
folder under the old key when one exists, so an upgrade recomputes nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from dualview.errors import DualviewError, warn_once
from dualview.io.atomic import atomic_write_text
from dualview.io.faults import fault_scope
from dualview.run_folder import write_stage_index

DONE_FILE = ".done.json"
# Bump when a stage's on-disk output format changes, to invalidate old run folders.
PIPELINE_VERSION = 1

StageFn = Callable[[Path, dict[str, Path]], dict[str, Any] | None]


def hash_path(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative names + bytes, sorted)."""
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
        root = path.parent
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        root = path
    else:
        raise DualviewError(f"{path}: stage input does not exist")
    for file in files:
        digest.update(str(file.relative_to(root)).encode())
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


class StageParams(BaseModel):
    """What a stage's key hashes besides its inputs and upstream keys: a frozen model whose
    key form (`key`) holds every field without a default, and a field with a default only
    when its value differs from it. So a field added later with a default (keeping the old
    behaviour) leaves every existing key, and so every finished stage folder, valid; the
    fields that were keyed before are declared without a default. The stages of an
    experiment have theirs in `dualview.pipeline.params`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def key(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True)


def key_params(params: StageParams | dict[str, Any]) -> dict[str, Any]:
    """The key form of a stage's params (a plain mapping, e.g. a test's, as it is)."""
    return params.key() if isinstance(params, StageParams) else params


@dataclass
class Stage:
    """One step of an experiment; ``fn(out_dir, upstream_dirs)`` does the work."""

    name: str
    fn: StageFn
    params: StageParams | dict[str, Any] = field(default_factory=dict)
    inputs: list[Path] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    description: str = ""


def _digest(stage: Stage, upstream: dict[str, str], **inputs: Any) -> str:
    payload = {"version": PIPELINE_VERSION, "name": stage.name, "params": key_params(stage.params)}
    payload.update(inputs, after=upstream)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def stage_key(stage: Stage, input_hashes: list[str], upstream: dict[str, str]) -> str:
    """sha256 of the stage's name, params, its inputs' content hashes (in order) and its
    upstream stages' keys."""
    return _digest(stage, upstream, input_sha256=input_hashes)


def path_keyed_stage_key(stage: Stage, input_hashes: list[str], upstream: dict[str, str]) -> str:
    """The key older versions gave a stage: each input's content hash under its path, so a
    moved project or another install of the bundled data changed it (read-only: only to
    find run folders they wrote; ``upstream`` holds the upstream stages' keys of this kind)."""
    paths = [str(p) for p in stage.inputs]
    return _digest(stage, upstream, inputs=dict(zip(paths, input_hashes, strict=True)))


@dataclass
class PlannedStage:
    stage: Stage
    key: str
    out_dir: Path
    reuse_from: tuple[Path, ...] = ()

    @property
    def reusable(self) -> Path | None:
        """A finished folder of this very stage (same name and key) in another run."""
        for run_dir in self.reuse_from:
            candidate = run_dir / self.out_dir.name
            if read_done(candidate).get("key") == self.key:
                return candidate
        return None

    @property
    def status(self) -> str:
        if read_done(self.out_dir).get("key") == self.key:
            return "cached"
        if self.out_dir.exists():
            return "partial"
        return "reusable" if self.reusable is not None else "pending"

    def copy_reusable(self) -> Path:
        """Copy the reusable folder here (via a temporary name, so no half copy remains)."""
        source = self.reusable
        assert source is not None
        partial = self.out_dir.with_name(f".{self.out_dir.name}.copying")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial)
        partial.rename(self.out_dir)
        return source


class Pipeline:
    """Stages in dependency order under one run folder."""

    def __init__(
        self, run_dir: str | Path, stages: list[Stage], reuse_from: list[Path] | None = None
    ) -> None:
        self.run_dir = Path(run_dir)
        self.stages = stages
        self.reuse_from = tuple(Path(p) for p in reuse_from or [])
        for other in self.reuse_from:
            if not other.is_dir():
                raise DualviewError(f"{other}: run folder to reuse stages from does not exist")
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise DualviewError(f"duplicate stage names in {names}")
        for stage in stages:
            for dep in stage.after:
                if dep not in names[: names.index(stage.name)]:
                    raise DualviewError(
                        f"stage {stage.name!r} needs {dep!r}, which must come first"
                    )

    def plan(self) -> list[PlannedStage]:
        """Keys and folders of every stage (hashes inputs; runs nothing). A stage with no
        folder under its key takes the folder an older dualview made under its path-keyed
        key, when there is one (module docstring)."""
        keys: dict[str, str] = {}
        old_keys: dict[str, str] = {}
        planned = []
        for stage in self.stages:
            hashes = [hash_path(Path(p)) for p in stage.inputs]
            key = stage_key(stage, hashes, {dep: keys[dep] for dep in stage.after})
            old_key = path_keyed_stage_key(
                stage, hashes, {dep: old_keys[dep] for dep in stage.after}
            )
            keys[stage.name], old_keys[stage.name] = key, old_key
            out_dir = self.run_dir / f"{stage.name}-{key[:12]}"
            old_dir = self.run_dir / f"{stage.name}-{old_key[:12]}"
            if not out_dir.exists() and old_dir.exists():
                key, out_dir = old_key, old_dir
            planned.append(PlannedStage(stage, key, out_dir, self.reuse_from))
        return planned

    def run(self, on_stage: Callable[[PlannedStage, str], None] | None = None) -> dict[str, Path]:
        """Run every stage that is not cached; returns ``name -> out_dir``."""
        outputs: dict[str, Path] = {}
        planned = self.plan()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_index({p.stage.name: p.out_dir for p in planned})
        for item in planned:
            outputs[item.stage.name] = item.out_dir
            status = item.status
            if on_stage:
                on_stage(item, status)
            if status == "cached":
                continue
            if status == "reusable":
                item.copy_reusable()
                if on_stage:
                    on_stage(item, "reused")
                continue
            item.out_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(
                item.out_dir / "params.json",
                json.dumps(key_params(item.stage.params), indent=2, sort_keys=True, default=str),
            )
            started = time.time()
            upstream = {dep: outputs[dep] for dep in item.stage.after}
            fault_scope(item.stage.name)
            summary = item.stage.fn(item.out_dir, upstream) or {}
            done = {"key": item.key, "seconds": round(time.time() - started, 2), **summary}
            atomic_write_text(item.out_dir / DONE_FILE, json.dumps(done, indent=2, default=str))
            if on_stage:
                on_stage(item, "done")
        return outputs

    def _write_index(self, outputs: dict[str, Path]) -> None:
        write_stage_index(self.run_dir, outputs)


def read_done(out_dir: Path) -> dict[str, Any]:
    """The summary a finished stage wrote (empty when unfinished).

    A damaged marker (truncated, garbage, not an object) counts as unfinished: it is reported
    once on stderr and removed, so the stage reruns instead of a wrong reuse or a crash.
    """
    path = out_dir / DONE_FILE
    if not path.exists():
        return {}
    try:
        done = json.loads(path.read_bytes())
    except (ValueError, OSError):
        done = None
    if isinstance(done, dict) and isinstance(done.get("key"), str):
        return done
    warn_once(f"warning: {path}: damaged stage marker removed; the stage reruns")
    path.unlink(missing_ok=True)
    return {}
