"""Resume under a changed config: find the keys that differ from the checkpoint's config.

Every checkpoint carries ``config.json``: the run's config (JSON form), the sha256 of every
file the config names (``data.train_file``, ``deepspeed_config``, ...) and the history of
accepted changes. ``dualview train --resume`` compares the config it is given with the
latest checkpoint's:

- a key whose value differs is a change (``old -> new``);
- a file the config names is compared by content: a path that only moved is not a change
  (the old and new paths name files with the same sha256), a file edited in place is one
  (same path, another sha256); snapshots written before hashes existed compare paths only;
- keys that change how the run is carried out, not what it computes, never count
  (``IGNORED_KEYS``: ``output_dir``, where the checkpoint is read from; loader workers and
  prefetch; logging, checkpoint and tracking settings).

Changes stop the resume (`ConfigChanged`, exit 2) unless they are allowed
(``--allow-config-change``); allowed changes are printed, written as one line to
``train_log.jsonl`` and to ``OUTPUT_DIR/config_changes.json`` (`record_change`, once the
checkpoint has loaded into the new config's model, so that a change the weights do not fit is
refused with nothing written), carried in later checkpoints, and copied into the saved model
folder. A ``config.json`` that is not a snapshot stops the resume with one located error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from dualview.data.manifest import file_sha256
from dualview.errors import ConfigError
from dualview.io.append import AppendJsonlWriter
from dualview.io.atomic import atomic_write_json
from dualview.train.checkpoint import damaged, latest_checkpoint, read_json, read_state, write_json
from dualview.train.config import NEUTRAL_NEW_KEYS, TrainConfig

SNAPSHOT_FILE = "config.json"
CHANGES_FILE = "config_changes.json"
# Keys that change how a run is carried out, not what it computes (the resume test shows the
# same weights with any number of loader workers): never a change. ``output_dir`` is where the
# checkpoint was just read from.
IGNORED_KEYS = frozenset(
    {
        "output_dir",
        "data.num_workers",
        "data.prefetch_batches",
        "log_every",
        "checkpoint_every",
        "keep_checkpoints",
        "tracking",
    }
)


class ConfigChanged(ConfigError):
    """A resume whose config differs from the checkpoint's (exit 2)."""


@dataclass(frozen=True)
class Change:
    """One config key that differs from the checkpoint's value."""

    key: str
    old: Any
    new: Any
    old_sha256: str | None = None  # set for a file the config names, when both are known
    new_sha256: str | None = None

    def describe(self) -> str:
        if self.old == self.new and self.old_sha256 and self.new_sha256:
            return (
                f"{self.key}: {json.dumps(self.new)} edited in place "
                f"(sha256 {self.old_sha256[:12]}… -> {self.new_sha256[:12]}…)"
            )
        return f"{self.key}: {json.dumps(self.old)} -> {json.dumps(self.new)}"

    def to_json(self) -> dict[str, Any]:
        data = {"key": self.key, "old": self.old, "new": self.new}
        if self.old_sha256 and self.new_sha256:
            data.update(old_sha256=self.old_sha256, new_sha256=self.new_sha256)
        return data


@dataclass(frozen=True)
class Resume:
    """What a run starts with: the snapshot its checkpoints carry, and the config change
    accepted now (None when there is none), which `record_change` writes once the
    checkpoint has loaded."""

    snapshot: dict[str, Any]
    change: dict[str, Any] | None = None


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"a.b.c": value}``; lists stay whole values."""
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name))
        else:
            flat[name] = value
    return flat


def _path_keys(config: TrainConfig) -> dict[str, Path]:
    """Config keys whose value is a path to an existing file."""
    flat = flatten(config.model_dump(mode="python"))
    return {k: v for k, v in flat.items() if isinstance(v, Path) and v.is_file()}


def snapshot(config: TrainConfig, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What a checkpoint stores about its config: values, file hashes, accepted changes."""
    return {
        "config": config.model_dump(mode="json"),
        "file_sha256": {k: file_sha256(p) for k, p in _path_keys(config).items()},
        "changes": list(history or []),
    }


def save_snapshot(staging: Path, data: dict[str, Any]) -> None:
    """Write the snapshot into a checkpoint's staging folder (renamed into place whole once
    complete, like its ``state.json``, so a plain write is enough and adds no fault point)."""
    write_json(staging / SNAPSHOT_FILE, data, indent=1)


def load_snapshot(checkpoint: Path) -> dict[str, Any] | None:
    """The checkpoint's config snapshot, or None for checkpoints written before it existed.
    A file that is not a snapshot is a located error (`dualview.train.checkpoint.damaged`)."""
    path = checkpoint / SNAPSHOT_FILE
    if not path.exists():
        return None
    data = read_json(path)
    kinds = {"config": dict, "file_sha256": dict, "changes": list}
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise damaged(path, "damaged: not a config snapshot (an object with a 'config' object)")
    for key, kind in kinds.items():
        if not isinstance(data.get(key, kind()), kind):
            raise damaged(path, f"damaged: {key!r} is not a JSON {kind.__name__}")
    return data


def file_hashes(config: TrainConfig) -> dict[str, str]:
    """sha256 of every existing file the config names, by key."""
    return {k: file_sha256(p) for k, p in _path_keys(config).items()}


_NO_DEFAULT = object()


def field_default(key: str) -> Any:
    """The default (JSON form) of the dotted config key ``key`` (``optim.fused``), so that a
    key of `NEUTRAL_NEW_KEYS`, added after a snapshot was written, is no change when left at
    it (other keys: no default, the snapshot's missing value differs from any value)."""
    if key not in NEUTRAL_NEW_KEYS:
        return _NO_DEFAULT
    model: Any = TrainConfig
    *parents, name = key.split(".")
    for parent in parents:
        field = model.model_fields.get(parent)
        model = field.annotation if field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return _NO_DEFAULT
    field = model.model_fields.get(name)
    if field is None and parents:  # a key its section writes without declaring it (loss.teacher)
        return model().model_dump(mode="json").get(name, _NO_DEFAULT)
    if field is None or field.is_required():
        return _NO_DEFAULT
    return TypeAdapter(field.annotation).dump_python(
        field.get_default(call_default_factory=True), mode="json"
    )


def config_changes(
    saved: dict[str, Any], config: TrainConfig, hashes_now: dict[str, str] | None = None
) -> list[Change]:
    """Keys of ``config`` that differ from the ``saved`` snapshot, sorted by key.

    A file both snapshots hashed is compared by content (module docstring); ``hashes_now``:
    `file_hashes` of ``config`` when the caller has them already."""
    old = flatten(saved.get("config", {}))
    new = flatten(config.model_dump(mode="json"))
    hashes = saved.get("file_sha256", {})
    current = file_hashes(config) if hashes_now is None else hashes_now
    changes = []
    for key in sorted(old.keys() | new.keys()):
        if key in IGNORED_KEYS or (key not in old and new.get(key) == field_default(key)):
            continue  # a neutral key added to the config since the snapshot, at its default
        then, now = hashes.get(key), current.get(key)
        if then and now:
            if then != now:
                changes.append(Change(key, old.get(key), new.get(key), then, now))
        elif old.get(key) != new.get(key):
            changes.append(Change(key, old.get(key), new.get(key)))
    return changes


def check_resume(
    config: TrainConfig, checkpoint: Path | None, allow: bool, main: bool = True
) -> Resume:
    """Compare ``config`` with ``checkpoint``'s; what the resumed run carries on with.

    Raises `ConfigChanged` listing ``key: old -> new`` when they differ and ``allow`` is
    false. Writes nothing: an allowed change is `Resume.change`, for `record_change`.
    """
    if checkpoint is None:
        return Resume(snapshot(config))
    saved = load_snapshot(checkpoint)
    step = read_state(checkpoint).step
    now = snapshot(config)
    if saved is None:
        if main:
            print(f"{checkpoint} has no {SNAPSHOT_FILE} (an older dualview wrote it): "
                  "the config was not compared", flush=True)  # fmt: skip
        return Resume(now)
    changes = config_changes(saved, config, now["file_sha256"])
    now["changes"] = history = list(saved.get("changes", []))
    if not changes:
        return Resume(now)
    listing = "\n".join(f"  {c.describe()}" for c in changes)
    if not allow:
        raise ConfigChanged(
            f"{checkpoint}: the config differs from the checkpoint's:\n{listing}\n"
            "resume with --allow-config-change to continue under the new config "
            "(the differences are then recorded), or start a fresh output_dir"
        )
    entry = {"step": step, "event": "config_change", "changes": [c.to_json() for c in changes]}
    history.append(entry)
    return Resume(now, entry)


def start(config: TrainConfig, resume: bool, allow: bool, main: bool = True) -> Resume:
    """What a run starts with: on resume, checked against the latest checkpoint."""
    if resume:
        checkpoint = latest_checkpoint(Path(config.output_dir) / "checkpoints")
        return check_resume(config, checkpoint, allow, main)
    return Resume(snapshot(config))


def record_change(output_dir: Path, resumed: Resume) -> None:
    """Print and record the change a resume accepted (nothing when there is none)."""
    entry = resumed.change
    if entry is None:
        return
    listing = "\n".join(f"  {Change(**c).describe()}" for c in entry["changes"])
    print(f"resuming at step {entry['step']} under a changed config:\n{listing}", flush=True)
    record_changes(output_dir, entry, resumed.snapshot["changes"])


def record_changes(output_dir: Path, entry: dict[str, Any], history: list[dict]) -> None:
    """One line in ``train_log.jsonl`` and the whole history in ``config_changes.json``."""
    with AppendJsonlWriter(output_dir / "train_log.jsonl") as log:
        log.write(entry)
    atomic_write_json(output_dir / CHANGES_FILE, history)


def copy_changes(history: list[dict[str, Any]], model_dir: Path | None) -> None:
    """Copy the accepted changes into the saved model folder (nothing when there are none)."""
    if history and model_dir is not None:
        atomic_write_json(model_dir / CHANGES_FILE, history)
