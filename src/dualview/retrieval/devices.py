"""Encoding on several devices at once: one process per device, results merged in order.

`encode_on_devices` cuts the length-sorted texts into one contiguous share per device,
balanced by total characters (a share of long texts holds fewer of them), and starts one
process per share (``spawn``: CUDA cannot be forked). Each process moves the model to its
device, casts it to the precision, and runs `dualview.retrieval.inference.encode_sorted`
with its own tokenizer workers; every finished chunk travels back to the parent through a
queue, so the caller caches chunks as they arrive and places them by their row in the input.

The model goes to the processes through ``torch.multiprocessing``: its CPU tensors move to
shared memory once instead of being copied into every process. Works with ``"cpu"`` devices
too (the tests use two), each process then taking its share of the cores.
"""

from __future__ import annotations

import copy
import itertools
import os
import queue
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dualview.errors import DualviewError
from dualview.retrieval.inference import (
    EncodeStats,
    cast_model,
    default_workers,
    encode_sorted,
)

#: Seconds between checks that every encoding process is still alive.
_POLL_S = 1.0


def balanced_shares(lengths: Sequence[int], parts: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of ``parts`` contiguous, non-empty shares of ``lengths``, sums alike.

    Fewer items than ``parts`` make one share per item.
    """
    n = len(lengths)
    if n <= parts:
        return [(i, i + 1) for i in range(n)]
    cost = np.cumsum(np.maximum(np.asarray(lengths, dtype=np.float64), 1.0))
    cuts = [0]
    for part in range(1, parts):
        cut = _nearest_cut(cost, cost[-1] * part / parts)
        cuts.append(min(max(cut, cuts[-1] + 1), n - (parts - part)))
    cuts.append(n)
    return list(itertools.pairwise(cuts))


def _nearest_cut(cost: np.ndarray, target: float) -> int:
    """The ``k`` whose first ``k`` items sum (``cost[k - 1]``) closest to ``target``."""
    above = int(np.searchsorted(cost, target))  # first prefix reaching the target
    below_sum = cost[above - 1] if above > 0 else 0.0
    return above if target - below_sum <= cost[above] - target else above + 1


def _cpu_model(model: Any) -> Any:
    """``model`` on the CPU (a copy when it sits elsewhere: the caller's model is not moved)."""
    return model if model.device.type == "cpu" else copy.deepcopy(model).to("cpu")


def _threads_per_process(devices: Sequence[str]) -> int:
    """CPU threads for each CPU device, so that they share the cores instead of fighting."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    on_cpu = sum(1 for d in devices if not d.startswith("cuda"))
    return max(1, (cores or 1) // max(on_cpu, 1))


def _child(model: Any, index: int, device: str, job: dict[str, Any], results: Any) -> None:
    """Process ``index``: encode ``job["texts"]`` on ``device``; chunks, end or error go back."""
    try:
        import torch

        if not device.startswith("cuda"):
            torch.set_num_threads(job["threads"])
        elif ":" in device:
            torch.cuda.set_device(device)  # pinned buffers and kernels on this device only
        model = cast_model(model.to(device), job["precision"], in_place=True)
        for start, vectors, stats in encode_sorted(
            model,
            job["texts"],
            job["prompt"],
            batch_size=job["batch_size"],
            workers=job["workers"],
            chunk_size=job["chunk_size"],
        ):
            results.put(("chunk", job["offset"] + start, vectors, stats))
        results.put(("done", index, None, None))
    except BaseException:  # the parent reports it
        results.put(("error", index, traceback.format_exc(), None))


def _check_alive(running: dict[int, Any], exited: set[int], devices: Sequence[str]) -> None:
    """Fail when a process died without a word; one that exited cleanly gets one more poll."""
    for index, process in running.items():
        if process.is_alive():
            continue
        if process.exitcode != 0 or index in exited:
            raise DualviewError(
                f"the encoding process on {devices[index]} ended (exit code {process.exitcode}) "
                "before finishing its share"
            )
        exited.add(index)


def encode_on_devices(
    model: Any,
    texts: Sequence[str],
    prompt: str | None,
    devices: Sequence[str],
    precision: str,
    batch_size: int,
    workers: int | None,
    chunk_size: int,
) -> Iterator[tuple[int, np.ndarray, EncodeStats]]:
    """Encode length-sorted ``texts`` on every device of ``devices`` at once.

    Yields ``(start, vectors, stats)`` per chunk in the order chunks finish (``start``: row in
    ``texts``). ``workers``: tokenizer processes per device (``None``: automatic).
    """
    import torch.multiprocessing as mp

    shares = balanced_shares([len(t) for t in texts], len(devices))
    context = mp.get_context("spawn")
    results = context.Queue()
    shared = _cpu_model(model)
    threads = _threads_per_process(devices)
    processes: dict[int, Any] = {}
    try:
        for index, (device, (start, stop)) in enumerate(zip(devices, shares, strict=False)):
            job = {
                "texts": list(texts[start:stop]),
                "offset": start,
                "prompt": prompt,
                "precision": precision,
                "batch_size": batch_size,
                "chunk_size": chunk_size,
                "threads": threads,
                "workers": default_workers(device, len(shares)) if workers is None else workers,
            }
            process = context.Process(target=_child, args=(shared, index, device, job, results))
            process.start()
            processes[index] = process
        yield from _collect(results, processes, devices)
    finally:
        for process in processes.values():
            if process.is_alive():
                process.terminate()
            process.join()


def _collect(
    results: Any, processes: dict[int, Any], devices: Sequence[str]
) -> Iterator[tuple[int, np.ndarray, Any]]:
    """Chunks from the processes until every one has said it is done."""
    running, exited = dict(processes), set()
    while running:
        try:
            kind, where, payload, stats = results.get(timeout=_POLL_S)
        except queue.Empty:
            _check_alive(running, exited, devices)
            continue
        if kind == "chunk":
            yield where, payload, stats
        elif kind == "done":
            running.pop(where)
        else:
            raise DualviewError(f"encoding on {devices[where]} failed:\n{payload}")


__all__ = ["balanced_shares", "encode_on_devices"]
