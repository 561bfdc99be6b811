"""The printed training line: one ``value unit`` (or ``name value``) item per quantity.

``step 3/6 · loss 0.3689 · lr 1.8e-05 · 71 docs · 380 tok/s · 0.0 TFLOP/s · MFU n/a``

Every item is a key of the step's record in ``train_log.jsonl``:

| printed | JSONL key |
|---|---|
| ``step 3/6`` | ``step`` (of the run's total) |
| ``loss 0.3689`` | ``loss`` |
| ``lr 1.8e-05`` | ``lr`` (the lr this step's update used) |
| ``71 docs`` | ``documents_encoded`` (documents encoded in the step, all ranks' batches) |
| ``380 tok/s`` | ``tokens_per_s`` (real, unpadded tokens per second) |
| ``0.0 TFLOP/s`` | ``tflops`` (achieved) |
| ``MFU 35.1%`` / ``MFU n/a`` | ``mfu`` (0-1, PaLM: forward + backward; null: peak unknown) |
| ``HFU 46.8%`` | ``hfu`` (GradCache's no-grad pass counted; shown when not MFU) |
| ``1.2 GiB peak`` | ``peak_memory_gib`` (only on GPU) |
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dualview.io.files import iter_binary_lines

SEPARATOR = " · "


def format_step(record: dict[str, Any], total_steps: int) -> str:
    """The printed line of one step's log record (see the module docstring)."""
    mfu = record.get("mfu")
    items = [
        f"step {record['step']}/{total_steps}",
        f"loss {record['loss']:.4f}",
        f"lr {record['lr']:.2g}",
        f"{record['documents_encoded']} docs",
        f"{record['tokens_per_s']:,.0f} tok/s",
        f"{record['tflops']:.1f} TFLOP/s",
        "MFU n/a" if mfu is None else f"MFU {100 * mfu:.1f}%",
    ]
    hfu = record.get("hfu")
    if hfu is not None and hfu != mfu:
        items.append(f"HFU {100 * hfu:.1f}%")
    if record.get("peak_memory_gib") is not None:
        items.append(f"{record['peak_memory_gib']:.1f} GiB peak")
    return SEPARATOR.join(items)


def read_loss_log(path: Path) -> list[tuple[int, float]]:
    """``(step, loss)`` pairs from a JSON-lines training log (lines without a loss skipped)."""
    curve = []
    if not path.is_file():
        return curve
    for _, _, raw in iter_binary_lines(path):
        try:
            entry = json.loads(raw)
        except ValueError:  # a torn or garbage line: skipped
            continue
        if isinstance(entry, dict) and "loss" in entry and "step" in entry:
            curve.append((int(entry["step"]), float(entry["loss"])))
    return curve
