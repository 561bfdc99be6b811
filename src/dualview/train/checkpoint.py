"""Checkpoints for exact resume: weights, optimizer, scheduler, RNG states, data position.

A checkpoint is a folder ``checkpoints/step-NNNNNNNN`` written under a temporary name and
renamed into place once complete, so a kill mid-save never leaves a half checkpoint that
``--resume`` would pick up. Each rank stores its own RNG states.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

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


def save_checkpoint(
    root: Path,
    state: TrainState,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rank: int = 0,
) -> Path:
    """Write one checkpoint (rank 0 writes weights and optimizer; every rank its RNG)."""
    final = checkpoint_dir(root, state.step)
    staging = final.with_name(final.name + ".tmp")
    staging.mkdir(parents=True, exist_ok=True)
    # The staging folder is renamed into place only when complete (publish_checkpoint).
    torch.save(rng_states(), staging / f"rng-{rank}.pt")
    fault_point("checkpoint rng")
    if rank == 0:
        torch.save(model.state_dict(), staging / "model.pt")
        fault_point("checkpoint model")
        torch.save(optimizer.state_dict(), staging / "optimizer.pt")
        torch.save(scheduler.state_dict(), staging / "scheduler.pt")
        fault_point("checkpoint optimizer")
        (staging / STATE_FILE).write_text(json.dumps(asdict(state)), encoding="utf-8")
    return staging


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


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rank: int = 0,
) -> TrainState:
    """Restore everything saved by `save_checkpoint`; returns the progress counters."""
    model.load_state_dict(torch.load(path / "model.pt", map_location="cpu", weights_only=True))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    rng_file = path / f"rng-{rank}.pt"
    if rng_file.exists():
        restore_rng_states(torch.load(rng_file, weights_only=False))
    return TrainState(**json.loads((path / STATE_FILE).read_text(encoding="utf-8")))
