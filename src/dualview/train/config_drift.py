"""Resume under a changed config: find the keys that differ from the checkpoint's config.

Every checkpoint carries ``config.json``: the run's config (JSON form), the sha256 of every
file the config names (``data.train_file``, ``deepspeed_config``, ...) and the history of
accepted changes. ``dualview train --resume`` compares the config it is given with the
latest checkpoint's:

- a key whose value differs is a change (``old -> new``);
- a path that only moved is not: the old and new paths name files with the same sha256;
- keys that change how the run is carried out, not what it computes, never count
  (``IGNORED_KEYS``: ``output_dir``, where the checkpoint is read from; loader workers and
  prefetch; logging, checkpoint and tracking settings).

Changes stop the resume (`ConfigChanged`, exit 2) unless they are allowed
(``--allow-config-change``); allowed changes are printed, written as one line to
``train_log.jsonl`` and to ``OUTPUT_DIR/config_changes.json``, carried in later checkpoints,
and copied into the saved model folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualview.data.manifest import file_sha256
from dualview.errors import ConfigError
from dualview.io.append import AppendJsonlWriter
from dualview.io.atomic import atomic_write_json
from dualview.train.checkpoint import STATE_FILE, latest_checkpoint
from dualview.train.config import TrainConfig

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

    def describe(self) -> str:
        return f"{self.key}: {json.dumps(self.old)} -> {json.dumps(self.new)}"

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "old": self.old, "new": self.new}


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
    (staging / SNAPSHOT_FILE).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def load_snapshot(checkpoint: Path) -> dict[str, Any] | None:
    """The checkpoint's config snapshot, or None for checkpoints written before it existed."""
    path = checkpoint / SNAPSHOT_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _moved_only(key: str, new: Any, hashes: dict[str, str]) -> bool:
    """True when ``key`` names a file whose content equals the one the checkpoint saw."""
    if key not in hashes or not isinstance(new, str) or not Path(new).is_file():
        return False
    return file_sha256(new) == hashes[key]


def config_changes(saved: dict[str, Any], config: TrainConfig) -> list[Change]:
    """Keys of ``config`` that differ from the ``saved`` snapshot, sorted by key."""
    old = flatten(saved.get("config", {}))
    new = flatten(config.model_dump(mode="json"))
    hashes = saved.get("file_sha256", {})
    changes = []
    for key in sorted(old.keys() | new.keys()):
        if key in IGNORED_KEYS or old.get(key) == new.get(key):
            continue
        if _moved_only(key, new.get(key), hashes):
            continue
        changes.append(Change(key, old.get(key), new.get(key)))
    return changes


def check_resume(
    config: TrainConfig, checkpoint: Path | None, allow: bool, main: bool = True
) -> dict[str, Any]:
    """Compare ``config`` with ``checkpoint``'s; the snapshot the resumed run carries on with.

    Raises `ConfigChanged` listing ``key: old -> new`` when they differ and ``allow`` is
    false. When allowed, the main process records the changes (see module docstring).
    """
    if checkpoint is None:
        return snapshot(config)
    saved = load_snapshot(checkpoint)
    if saved is None:
        if main:
            print(f"{checkpoint} has no {SNAPSHOT_FILE} (an older dualview wrote it): "
                  "the config was not compared", flush=True)  # fmt: skip
        return snapshot(config)
    changes = config_changes(saved, config)
    history = list(saved.get("changes", []))
    if not changes:
        return snapshot(config, history)
    listing = "\n".join(f"  {c.describe()}" for c in changes)
    if not allow:
        raise ConfigChanged(
            f"{checkpoint}: the config differs from the checkpoint's:\n{listing}\n"
            "resume with --allow-config-change to continue under the new config "
            "(the differences are then recorded), or start a fresh output_dir"
        )
    step = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))["step"]
    entry = {"step": step, "event": "config_change", "changes": [c.to_json() for c in changes]}
    history.append(entry)
    if main:
        print(f"resuming at step {step} under a changed config:\n{listing}", flush=True)
        record_changes(Path(config.output_dir), entry, history)
    return snapshot(config, history)


def start(config: TrainConfig, resume: bool, allow: bool, main: bool = True) -> dict[str, Any]:
    """The snapshot a run starts with: checked against the latest checkpoint on resume; a
    fresh run forgets the changes file of an earlier run in the same folder."""
    output_dir = Path(config.output_dir)
    if resume:
        return check_resume(config, latest_checkpoint(output_dir / "checkpoints"), allow, main)
    if main:
        (output_dir / CHANGES_FILE).unlink(missing_ok=True)
    return snapshot(config)


def record_changes(output_dir: Path, entry: dict[str, Any], history: list[dict]) -> None:
    """One line in ``train_log.jsonl`` and the whole history in ``config_changes.json``."""
    with AppendJsonlWriter(output_dir / "train_log.jsonl") as log:
        log.write(entry)
    atomic_write_json(output_dir / CHANGES_FILE, history)


def copy_changes(history: list[dict[str, Any]], model_dir: Path | None) -> None:
    """Copy the accepted changes into the saved model folder (nothing when there are none)."""
    if history and model_dir is not None:
        atomic_write_json(model_dir / CHANGES_FILE, history)
