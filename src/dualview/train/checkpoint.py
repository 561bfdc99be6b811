"""Checkpoints for exact resume: weights, optimizer, scheduler, RNG states, data position.

A checkpoint is a folder ``checkpoints/step-NNNNNNNN`` written under a temporary name and
renamed into place once complete (each file fsynced first), so a kill mid-save never leaves a
half checkpoint that ``--resume`` would pick up; a failed write (a full disk) removes the
unfinished folder and stops with one error naming the file (`writing`), the published
checkpoints untouched. Each rank stores its own RNG states.

The weights of a model with frozen parameters (LoRA on a base model, a frozen tower) are
saved without them (`model_state`): what never changes comes back from the base when the
run is built again for ``--resume``, so a LoRA checkpoint of a 1.5B model holds megabytes of
adapter instead of gigabytes of base weights. Buffers are always saved.

A checkpoint that cannot be read (a truncated ``model.pt``, a garbage ``state.json``) or whose
weights do not fit the configured model stops the resume with one `DataError` naming the file
(exit 2). No older checkpoint is taken silently instead: that would redo steps without saying
so and hide a damaged disk; the message names the earlier checkpoint to fall back to by
removing the damaged one.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import pickle
import random
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from dualview.errors import DataError, input_error
from dualview.io.faults import fault_point
from dualview.train.batching import DataPosition

STATE_FILE = "state.json"


@dataclass
class TrainState:
    """Progress counters saved with every checkpoint."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0

    @property
    def position(self) -> DataPosition:
        return DataPosition(self.epoch, self.batch_index)


def rng_states() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def checkpoint_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:08d}"


def staging_dir(root: Path, step: int) -> Path:
    """Where the checkpoint of ``step`` is written before `publish_checkpoint` renames it."""
    final = checkpoint_dir(root, step)
    return final.with_name(final.name + ".tmp")


def write_file(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``fill(handle)`` and fsync it; an `OSError` names ``path``.

    ``torch.save`` into a Python file, not a path: its own writer turns a full disk into a
    ``RuntimeError`` (``inline_container.cc``), a Python file raises the ``OSError``.
    """
    try:
        with path.open("wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        exc.filename = exc.filename or str(path)
        raise


def save_tensors(obj: Any, path: Path) -> None:
    write_file(path, functools.partial(torch.save, obj))


def write_json(path: Path, data: Any, indent: int | None = None) -> None:
    text = json.dumps(data, indent=indent) + ("\n" if indent is not None else "")
    write_file(path, lambda handle: handle.write(text.encode("utf-8")))


@contextmanager
def writing(staging: Path) -> Iterator[Path]:
    """Around the writes of one checkpoint: an OS error (a full disk) removes the unfinished
    ``staging`` folder and becomes one `DataError` naming the file; the checkpoints already
    published are untouched."""
    try:
        yield staging
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        path = Path(exc.filename or staging)
        reason = input_error(path, exc).message
        raise DataError(
            path, None, "write", f"{reason}; this checkpoint was not saved, earlier ones are intact"
        ) from None


def save_checkpoint(
    root: Path,
    state: TrainState,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rank: int = 0,
) -> Path:
    """Write one checkpoint (rank 0 writes weights and optimizer; every rank its RNG).

    Call it inside `writing` (on the staging folder it returns)."""
    staging = staging_dir(root, state.step)
    staging.mkdir(parents=True, exist_ok=True)
    # The staging folder is renamed into place only when complete (publish_checkpoint).
    save_tensors(rng_states(), staging / f"rng-{rank}.pt")
    fault_point("checkpoint rng")
    if rank == 0:
        save_tensors(model_state(model), staging / "model.pt")
        fault_point("checkpoint model")
        save_tensors(optimizer.state_dict(), staging / "optimizer.pt")
        save_tensors(scheduler.state_dict(), staging / "scheduler.pt")
        fault_point("checkpoint optimizer")
        write_json(staging / STATE_FILE, asdict(state))
    return staging


def frozen_names(model: torch.nn.Module) -> set[str]:
    """The ``state_dict`` names of the parameters that do not train (every name a tied
    parameter has)."""
    return {
        name
        for name, param in model.named_parameters(remove_duplicate=False)
        if not param.requires_grad
    }


def model_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint keeps of ``model``: its ``state_dict`` without the frozen
    parameters (module docstring); the whole of it when everything trains."""
    frozen = frozen_names(model)
    state = model.state_dict()
    return {name: value for name, value in state.items() if name not in frozen}


def publish_checkpoint(staging: Path, keep: int) -> Path:
    """Rename a fully written checkpoint into place and prune older ones (rank 0)."""
    final = staging.with_name(staging.name.removesuffix(".tmp"))
    if final.exists():
        shutil.rmtree(final)
    fault_point("checkpoint publish")
    staging.rename(final)
    for old in sorted(complete_checkpoints(final.parent))[:-keep]:
        shutil.rmtree(old)
    return final


def complete_checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.glob("step-*") if not p.name.endswith(".tmp") and (p / STATE_FILE).exists()
    )


def latest_checkpoint(root: Path) -> Path | None:
    found = complete_checkpoints(root)
    return found[-1] if found else None


def damaged(path: Path, reason: str) -> DataError:
    """``PATH: checkpoint: REASON`` and how to go on: the earlier checkpoint, or afresh."""
    folder = path.parent
    earlier = [p for p in complete_checkpoints(folder.parent) if p.name < folder.name]
    way = (
        f"remove {folder} to resume from {earlier[-1].name}"
        if earlier
        else "start afresh with --overwrite-output-dir"
    )
    return DataError(path, None, "checkpoint", f"{reason}; {way}")


def _first_sentence(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text.split(". ")[0][:200]


def _unreadable(path: Path, exc: OSError) -> DataError:
    """A missing file, or one that cannot be read (torch seeks past the end of some truncated
    files: EINVAL)."""
    reason = input_error(path, exc).message
    return damaged(
        path, reason if exc.errno == errno.ENOENT else f"damaged or unreadable ({reason})"
    )


def load_file(path: Path, weights_only: bool = True, map_location: str | None = None) -> Any:
    """``torch.load`` of one checkpoint file; an unreadable one is a `damaged` error."""
    try:
        return torch.load(path, map_location=map_location, weights_only=weights_only)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    except (RuntimeError, EOFError, pickle.UnpicklingError, ValueError) as exc:
        raise damaged(path, f"damaged or unreadable ({_first_sentence(exc)})") from None


def read_json(path: Path) -> Any:
    """A JSON file of a checkpoint; unreadable or not JSON is a `damaged` error."""
    try:
        return json.loads(path.read_bytes())
    except OSError as exc:
        raise _unreadable(path, exc) from None
    except ValueError as exc:
        raise damaged(path, f"damaged: not valid JSON ({exc})") from None


def read_state(checkpoint: Path) -> TrainState:
    """The progress counters in ``CHECKPOINT/state.json`` (non-negative integers)."""
    path = checkpoint / STATE_FILE
    data = read_json(path)
    names = [f.name for f in fields(TrainState)]
    valid = isinstance(data, dict) and set(names) <= set(data)
    if not valid or not all(type(data[n]) is int and data[n] >= 0 for n in names):
        raise damaged(path, f"damaged: expected an object of non-negative integers {names}")
    return TrainState(**{n: data[n] for n in names})


def _does_not_fit(path: Path, what: str, detail: str) -> DataError:
    return DataError(
        path,
        None,
        "checkpoint",
        f"does not fit the configured {what}: {detail}; resume with the checkpoint's "
        "model settings, or train the new model in a fresh output_dir",
    )


def _restore(path: Path, target: Any, what: str, map_location: str | None = None) -> None:
    """``target.load_state_dict`` of the file ``path``; a mismatch is one located error."""
    saved = load_file(path, map_location=map_location)
    try:
        target.load_state_dict(saved)
    except (RuntimeError, ValueError, KeyError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = (lines[1] if len(lines) > 1 else _first_sentence(exc))[:200]
        more = f" (and {len(lines) - 2} more)" if len(lines) > 2 else ""
        raise _does_not_fit(path, what, f"{detail}{more}") from None


def _restore_model(path: Path, model: torch.nn.Module) -> None:
    """The weights of `model_state` into ``model``: every entry but its frozen parameters
    must be in the file (an older checkpoint holding those too still loads)."""
    frozen = frozen_names(model)
    if not frozen:
        _restore(path, model, "model", map_location="cpu")
        return
    saved = load_file(path, map_location="cpu")
    lacking = [name for name in model.state_dict() if name not in frozen and name not in saved]
    if lacking:
        more = f" (and {len(lacking) - 1} more)" if len(lacking) > 1 else ""
        raise _does_not_fit(path, "model", f"no weights for {lacking[0]!r}{more}")
    try:
        result = model.load_state_dict(saved, strict=False)
    except (RuntimeError, ValueError, KeyError) as exc:
        raise _does_not_fit(path, "model", _first_sentence(exc)) from None
    if result.unexpected_keys:
        extra = result.unexpected_keys
        more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        raise _does_not_fit(path, "model", f"unexpected weights {extra[0]!r}{more}")


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rank: int = 0,
) -> TrainState:
    """Restore everything saved by `save_checkpoint`; returns the progress counters.

    A file that cannot be read, or weights of another shape or model kind, stop with one
    `DataError` naming the file (module docstring)."""
    state = read_state(path)
    _restore_model(path / "model.pt", model)
    _restore(path / "optimizer.pt", optimizer, "optimizer")
    _restore(path / "scheduler.pt", scheduler, "scheduler")
    rng_file = path / f"rng-{rank}.pt"
    if rng_file.exists():
        restore_rng_states(load_file(rng_file, weights_only=False))
    return state
