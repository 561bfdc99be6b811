"""The training loop: accelerate for devices, precision and trackers; exact resume.

One optimizer step = ``grad_accumulation_steps`` batches (each a full batch of
``batch_size`` records built by `dualview.train.batching`), each run by the model family's
step (`dualview.train.families`), optionally in GradCache chunks (`dualview.train.gradcache`).
Across processes every rank sees the same global batch, encodes its share, and parameter
gradients are summed over ranks, so N processes compute the same update as one process with
the whole batch.

Checkpoints (every ``checkpoint_every`` steps and on SIGTERM) hold weights, optimizer,
scheduler, RNG states and the data position; ``resume=True`` restarts from the latest one and
reproduces the uninterrupted run. Per-step metrics go to stdout and ``train_log.jsonl``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn

from dualview.data.manifest import manifest_path
from dualview.data.record_index import IndexedRecords
from dualview.errors import ConfigError, DataError
from dualview.io.append import AppendJsonlWriter, repair_torn_tail
from dualview.io.atomic import atomic_write_text
from dualview.lock import folder_lock
from dualview.models import unpadded
from dualview.models.compiled import compile_backbone
from dualview.perf import (
    ModelShape,
    ThroughputMeter,
    cuda_half_precision,
    current_device_name,
    peak_memory_gib,
    peak_tflops,
    training_flops,
)
from dualview.progress import make_progress
from dualview.resources import optional_import
from dualview.train import checkpoint as ckpt
from dualview.train import config_drift as drift
from dualview.train.batching import Batch, BatchStream, DataPosition
from dualview.train.config import OptimConfig, TrainConfig
from dualview.train.families import family_of
from dualview.train.launch import check_launch
from dualview.train.loader import BatchTokenizer, PairTokenizer, prepared_batches
from dualview.train.objectives import build_objective
from dualview.train.schedule import (
    StepPlan,
    build_scheduler,
    plan_steps,
    schedule_warnings,
    zero_lr_steps,
)
from dualview.train.step import Chunking, all_reduce_gradients
from dualview.train.step_log import format_step, read_loss_log
from dualview.train.teacher import run_teacher

LOG_FILE = "train_log.jsonl"
MODEL_DIR = "model"


def build_optimizer(model: nn.Module, config: OptimConfig) -> torch.optim.Optimizer:
    """AdamW (fused on CUDA unless ``optim.fused`` says otherwise); biases and normalisation
    weights are not decayed; the model's interaction head (``model.head_parameters()``) has
    its own group (``optim.head_lr``, ``optim.head_weight_decay``), last so that group 0
    stays the backbone's."""
    head = {id(p) for p in getattr(model, "head_parameters", list)()}
    decay, no_decay, head_params = [], [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if id(param) in head:
            head_params.append(param)
        else:
            (no_decay if param.ndim < 2 or "norm" in name.lower() else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if head_params:
        groups.append(
            {"params": head_params, "lr": config.head_lr, "weight_decay": config.head_weight_decay}
        )
    on_cuda = all(p.is_cuda for group in groups for p in group["params"])
    fused = on_cuda if config.fused is None else config.fused
    return torch.optim.AdamW(groups, lr=config.lr, fused=fused or None)


def resolve_precision(requested: str) -> str:
    """``auto`` -> ``bf16`` on a GPU that supports it (else ``fp16``), ``no`` on CPU."""
    if requested != "auto":
        return requested
    return cuda_half_precision() if torch.cuda.is_available() else "no"


def resolve_workers(requested: int | str) -> int:
    """``auto`` -> 2 loader workers when training on a GPU, 0 (the main process) on CPU."""
    if requested != "auto":
        return int(requested)
    return 2 if torch.cuda.is_available() else 0


def load_training_records(path: Path) -> IndexedRecords:
    """The training file, validated in one pass and indexed; records are read per batch."""
    records = IndexedRecords(path)
    if not len(records):
        raise DataError(path, None, "file", "no training records")
    return records


@dataclass
class TrainResult:
    """What a finished (or interrupted) run produced."""

    model_dir: Path | None
    steps: int
    interrupted: bool
    first_loss: float | None
    last_loss: float | None


class StopRequested:
    """SIGTERM handler: ask the loop to checkpoint and stop at the next step boundary."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> StopRequested:
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not in the main thread
            self._previous = None
        return self

    def _handle(self, signum, frame) -> None:
        self.requested = True

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def build_model(config: TrainConfig) -> nn.Module:
    """The model ``model.kind`` names, built by its family (`dualview.train.families`)."""
    return family_of(config.model.kind).build(config.model)


class Trainer:
    """Train the model of ``model.kind`` (its `dualview.train.families.ModelFamily`) as
    configured; see the module docstring."""

    def __init__(self, config: TrainConfig, start: drift.Resume | None = None) -> None:
        self.config = config
        # its snapshot is written into every checkpoint; an accepted config change is recorded
        # once the checkpoint has loaded (train/config_drift.py)
        self.start = start
        self.precision = resolve_precision(config.mixed_precision)
        self.accelerator = self._make_accelerator()
        records = load_training_records(config.data.train_file)
        set_seed(config.seed)
        self.family = family_of(config.model.kind)
        self.model = build_model(config).to(self.accelerator.device)
        backbone = getattr(self.model, "backbone", self.model)
        self.shape = ModelShape.of(backbone)
        if config.model.unpadded and config.varlen_kernel != "auto":
            unpadded.enable(backbone, config.varlen_kernel)
        compile_backbone(backbone, config.compile)
        self.loss_fn = build_objective(config.loss)
        self.stream = BatchStream(
            records,
            batch_size=config.batch_size,
            policy=config.data.view_policy,
            num_negatives=config.data.num_negatives,
            template=config.model.query_template,
            seed=config.seed,
            drop_last=config.data.drop_last,
            teacher=run_teacher(config, records, str(self.accelerator.device)),
        )
        self.plan = self._plan_steps()
        self.total_steps = self.plan.total_steps
        self.chunking = self._chunking()
        self.meter = ThroughputMeter(peak_tflops(current_device_name()))
        self.optimizer = build_optimizer(self.model, config.optim)
        self.scheduler = build_scheduler(self.optimizer, config.optim, self.total_steps)
        self._warn_schedule()
        self.scaler = torch.amp.GradScaler(
            self.accelerator.device.type, enabled=self.precision == "fp16"
        )
        if self._deepspeed:
            self.model, self.optimizer, self.scheduler = self.accelerator.prepare(
                self.model, self.optimizer, self.scheduler
            )
        self.output_dir = Path(config.output_dir)
        self.checkpoints = self.output_dir / "checkpoints"

    # -- setup -----------------------------------------------------------------------------

    @property
    def _deepspeed(self) -> bool:
        return self.config.deepspeed_config is not None

    def _make_accelerator(self) -> Accelerator:
        config = self.config
        check_launch()  # accelerate's CPU launcher may start one process of several
        kwargs: dict[str, Any] = {"mixed_precision": self.precision}
        if not torch.cuda.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            kwargs["cpu"] = True  # several CPU processes (torchrun): accelerate's MULTI_CPU, gloo
        if config.deepspeed_config is not None:
            optional_import("deepspeed", "deepspeed_config")
            from accelerate.utils import DeepSpeedPlugin  # imports deepspeed's integration

            kwargs["deepspeed_plugin"] = DeepSpeedPlugin(hf_ds_config=str(config.deepspeed_config))
        if config.tracking != "none":  # accelerate would only warn and track nothing
            optional_import(config.tracking, f"tracking: {config.tracking}")
            kwargs["log_with"] = config.tracking
            kwargs["project_dir"] = str(config.output_dir)
        return Accelerator(**kwargs)

    def _chunking(self) -> Chunking | None:
        """GradCache chunking: off, a number of texts, or a measured token budget (auto); and
        how many tokens of trailing chunks keep their first-pass graphs."""
        config = self.config
        size = config.gradcache_chunk_size
        if size is None:
            return None
        measured = size == "auto" and config.gradcache_max_tokens is None
        retain = config.gradcache_retain_tokens
        budget = None
        if measured or (config.gradcache_retain_last and retain is None):
            budget = self.family.token_budget(self.model, self._autocast, config.model)
            if self.accelerator.is_main_process and (measured or budget.bytes_per_token):
                print(budget.describe(), flush=True)
        if retain is None:
            retain = budget.fit_tokens if budget is not None else 0
        common = {
            "pad_multiple": config.pad_multiple,
            "retain_last": config.gradcache_retain_last,
            "retain_tokens": retain,
        }
        if size != "auto":
            return Chunking(max_items=int(size), **common)
        tokens = budget.max_tokens if measured else config.gradcache_max_tokens
        return Chunking(max_tokens=tokens, **common)

    def _plan_steps(self) -> StepPlan:
        """The run's steps: ``max_steps`` when set (it overrides ``epochs``), else ``epochs``
        passes (`dualview.train.schedule.plan_steps`)."""
        config = self.config
        plan = plan_steps(
            self.stream.batches_per_epoch(),
            config.grad_accumulation_steps,
            config.epochs,
            config.max_steps,
        )
        if plan.steps_per_epoch == 0:
            raise ConfigError(
                f"{config.data.train_file}: too few records for one step of "
                f"batch_size {config.batch_size} x {config.grad_accumulation_steps}"
            )
        return plan

    def _warn_schedule(self) -> None:
        """Steps at lr 0 and a ``max_steps`` beyond one pass: one warning line each on
        stderr (every run, not once per process: a pipeline trains several)."""
        if not self.accelerator.is_main_process:
            return
        zero = zero_lr_steps(self.scheduler, self.total_steps)
        for line in schedule_warnings(self.plan, zero, str(self.config.data.train_file)):
            print(line, file=sys.stderr, flush=True)

    # -- loop ------------------------------------------------------------------------------

    def train(self, resume: bool = False) -> TrainResult:
        state = self._resume() if resume else ckpt.TrainState()
        if not resume and self.accelerator.is_main_process:
            (self.output_dir / LOG_FILE).unlink(missing_ok=True)
        if self.config.tracking != "none":
            self.accelerator.init_trackers(
                "dualview-train", config=self.config.model_dump(mode="json")
            )
        batches = self._batches(state)
        # on resume the main process's log holds the steps up to the checkpoint (_resume)
        main_resumed = resume and self.accelerator.is_main_process
        first, last = logged_losses(self.output_dir / LOG_FILE) if main_resumed else (None, None)
        interrupted = False
        log = (
            AppendJsonlWriter(self.output_dir / LOG_FILE)
            if self.accelerator.is_main_process
            else None
        )
        if self.accelerator.is_main_process:
            print(f"training on {self.accelerator.num_processes} process(es)", flush=True)
        start = time.perf_counter()
        self.meter.reset()
        # closing() stops and joins the loader's threads before the process may exit
        with closing(batches), StopRequested() as stop, make_progress() as progress:
            task = progress.add_task("training", total=self.total_steps, status="")
            progress.update(task, completed=state.step)
            while state.step < self.total_steps:
                record = self._optimizer_step(batches, state)
                if record is None:
                    break
                first = record["loss"] if first is None else first
                last = record["loss"]
                record["elapsed_s"] = round(time.perf_counter() - start, 3)
                self._log(record, log)
                progress.update(task, advance=1, status=f"loss {last:.4f}")
                stopping = self._any_rank(stop.requested)
                if state.step % self.config.checkpoint_every == 0 or stopping:
                    self.save_checkpoint(state)
                if stopping:
                    interrupted = True
                    break
        if log is not None:
            log.close()
        model_dir = None if interrupted else self.save_model()
        if self.config.tracking != "none":
            self.accelerator.end_training()
        return TrainResult(model_dir, state.step, interrupted, first, last)

    def _batches(self, state: ckpt.TrainState) -> Iterator[tuple[DataPosition, Batch]]:
        """The run's batches from the saved position, tokenized ahead by loader workers."""
        return prepared_batches(
            self.stream,
            state.position,
            self.plan.epochs,
            self._batch_preparation(),
            num_workers=resolve_workers(self.config.data.num_workers),
            prefetch=self.config.data.prefetch_batches,
        )

    def _batch_preparation(self) -> BatchTokenizer | PairTokenizer:
        """What loader workers do to a batch: tokenize its text groups (or its pairs)."""
        return self.family.batch_preparation(self._unwrapped(), self.loss_fn)

    def _any_rank(self, flag: bool) -> bool:
        """True when ``flag`` is set on any rank (all ranks must stop at the same step)."""
        if self.accelerator.num_processes == 1:
            return flag
        value = torch.tensor([float(flag)], device=self.accelerator.device)
        return bool(self.accelerator.reduce(value, reduction="sum").item() > 0)

    def _autocast(self):
        return self.accelerator.autocast() if self.precision != "no" else nullcontext()

    def _backward(self, loss: torch.Tensor) -> None:
        if self._deepspeed:
            self.accelerator.backward(loss)
        else:
            self.scaler.scale(loss).backward()

    def _optimizer_step(
        self, batches: Iterator[tuple[DataPosition, Batch]], state: ckpt.TrainState
    ) -> dict[str, Any] | None:
        """Run one optimizer step; returns its log record, or None when the data ran out."""
        accumulation = self.config.grad_accumulation_steps
        world = self.accelerator.num_processes
        # DeepSpeed averages gradients over ranks; our own reduction sums them.
        scale = (world if self._deepspeed else 1.0) / accumulation
        self.model.train()
        losses, documents, queries, tokens = [], 0, 0, 0
        for _ in range(accumulation):
            item = next(batches, None)
            if item is None:
                return None
            position, batch = item
            stats = self.family.step()(
                self.model,
                self.loss_fn,
                batch,
                scale=scale,
                chunk_size=self.chunking,
                autocast=self._autocast,
                backward=self._backward,
            )
            losses.append(stats.loss)
            documents += stats.documents
            queries += stats.queries
            tokens += stats.tokens
            # MFU counts forward + backward; HFU adds GradCache's second forwards (dualview.perf)
            flops, hardware = training_flops(self.shape, stats.lengths, stats.rerun_lengths)
            self.meter.add(stats.tokens, flops, stats.padded_tokens, hardware)
            state.epoch, state.batch_index = position.epoch, position.batch_index
        lr = self.scheduler.get_last_lr()[0]  # the lr of this update (the scheduler steps after)
        self._apply_update()
        state.step += 1
        speed = self.meter.report()
        self.meter.reset()
        memory = peak_memory_gib()
        return {
            "step": state.step,
            "epoch": state.epoch,
            "loss": sum(losses) / len(losses),
            "lr": lr,
            "queries": queries,
            "documents_encoded": documents,
            "tokens": tokens,
            **speed,  # this process: tokens_per_s, (hw_)tflops, mfu, hfu (None on CPU), padding
            "peak_memory_gib": round(memory, 2) if memory is not None else None,
        }

    def _apply_update(self) -> None:
        if self._deepspeed:
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad()
            return
        all_reduce_gradients(self.model)
        self.scaler.unscale_(self.optimizer)
        if self.config.optim.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optim.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _log(self, record: dict[str, Any], log: AppendJsonlWriter | None) -> None:
        if self.config.tracking != "none":
            self.accelerator.log(
                {k: v for k, v in record.items() if k != "step"}, step=record["step"]
            )
        if log is None:
            return
        log.write(record)
        if record["step"] % self.config.log_every == 0:
            print(format_step(record, self.total_steps), flush=True)

    # -- persistence -----------------------------------------------------------------------

    def _unwrapped(self) -> nn.Module:
        return self.accelerator.unwrap_model(self.model)

    def save_checkpoint(self, state: ckpt.TrainState) -> Path:
        """Write and publish a checkpoint; a full disk stops with one error, the earlier
        checkpoints intact (`dualview.train.checkpoint.writing`)."""
        rank = self.accelerator.process_index
        staging = ckpt.staging_dir(self.checkpoints, state.step)
        with ckpt.writing(staging):
            model = self._unwrapped()
            ckpt.save_checkpoint(
                self.checkpoints, state, model, self.optimizer, self.scheduler, rank
            )
            if rank == 0 and self.start is not None:
                drift.save_snapshot(staging, self.start.snapshot)
        self.accelerator.wait_for_everyone()
        final = staging
        if self.accelerator.is_main_process:
            with ckpt.writing(staging):
                final = ckpt.publish_checkpoint(staging, self.config.keep_checkpoints)
        self.accelerator.wait_for_everyone()
        return final

    def _resume(self) -> ckpt.TrainState:
        path = ckpt.latest_checkpoint(self.checkpoints)
        if path is None:
            print(f"no checkpoint under {self.checkpoints}: starting from scratch", flush=True)
            if self.accelerator.is_main_process:  # log lines of the killed attempt
                truncate_log(self.output_dir / LOG_FILE, 0)
            return ckpt.TrainState()
        state = ckpt.load_checkpoint(
            path, self._unwrapped(), self.optimizer, self.scheduler, self.accelerator.process_index
        )
        if self.accelerator.is_main_process:
            truncate_log(self.output_dir / LOG_FILE, state.step)
            if self.start is not None:  # the weights fit: the change can be recorded
                drift.record_change(self.output_dir, self.start)
        print(f"resumed from {path} at step {state.step}", flush=True)
        return state

    def save_model(self) -> Path | None:
        """Write the trained model to ``OUTPUT_DIR/model`` as its family saves it (main
        process): a sentence-transformers folder, or a reranker's folder."""
        self.accelerator.wait_for_everyone()
        if not self.accelerator.is_main_process:
            return None
        config_yaml = yaml.safe_dump(self.config.model_dump(mode="json"), sort_keys=False)
        manifest = manifest_path(Path(self.config.data.train_file))
        return self.family.save(
            self._unwrapped(), self.output_dir / MODEL_DIR, config_yaml, manifest
        )


def truncate_log(path: Path, step: int) -> None:
    """Drop log lines past ``step`` (written after the checkpoint a resume starts from), and
    a torn last line left by a kill."""
    if not path.exists():
        return
    repair_torn_tail(path)
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if line.strip() and json.loads(line).get("step", 0) <= step
    ]
    atomic_write_text(path, "".join(kept))


def logged_losses(path: Path) -> tuple[float | None, float | None]:
    """The first and last step loss in a run's ``train_log.jsonl`` (None when it has none),
    so that a resumed run reports the losses of the steps it did not redo."""
    curve = read_loss_log(path)
    return (curve[0][1], curve[-1][1]) if curve else (None, None)


# What a training run leaves in its output_dir (and a fresh run refuses to mix with).
RUN_FILES = ("checkpoints", LOG_FILE, MODEL_DIR, drift.CHANGES_FILE)


def earlier_run(output_dir: Path) -> list[str]:
    """The files of an earlier training run in ``output_dir`` (`RUN_FILES` there)."""
    found = []
    for name in RUN_FILES:
        path = output_dir / name
        if path.is_file() or (path.is_dir() and any(path.iterdir())):
            found.append(name)
    return found


def prepare_fresh(output_dir: Path, overwrite: bool) -> None:
    """Before a fresh (not resumed) run: refuse an ``output_dir`` holding an earlier run, so
    that a later ``--resume`` can never continue that run's checkpoints; ``overwrite``
    deletes those files instead (only them: other files in the folder stay)."""
    found = earlier_run(output_dir)
    if not found:
        return
    if not overwrite:
        raise ConfigError(
            f"{output_dir}: output_dir holds an earlier training run ({', '.join(found)}); "
            "continue it with --resume, delete it with --overwrite-output-dir, "
            "or choose another output_dir"
        )
    for name in found:
        path = output_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    print(f"{output_dir}: deleted the earlier run's {', '.join(found)}", flush=True)


def train(
    config: TrainConfig,
    resume: bool = False,
    allow_config_change: bool = False,
    overwrite: bool = False,
) -> TrainResult:
    """Library entry point: build a `Trainer` and run it.

    One training per output folder: the first process (``RANK`` 0, or the only one) holds
    ``OUTPUT_DIR/.dualview.lock`` for the whole run, so a second run on the same folder stops
    at once (exit 2, naming the holder's pid) instead of mixing checkpoints and logs.

    A fresh run refuses an ``output_dir`` that holds an earlier run unless ``overwrite``
    (`prepare_fresh`). A resume whose config differs from the checkpoint's stops (exit 2)
    unless ``allow_config_change``; see `dualview.train.config_drift`.
    """
    if resume and overwrite:
        raise ConfigError("--overwrite-output-dir starts afresh: it cannot go with --resume")
    first = int(os.environ.get("RANK", "0")) == 0
    with folder_lock(config.output_dir, "training folder") if first else nullcontext():
        if first and not resume:
            prepare_fresh(Path(config.output_dir), overwrite)
        start = drift.start(config, resume, allow_config_change, main=first)
        result = Trainer(config, start).train(resume=resume)
        drift.copy_changes(start.snapshot["changes"], result.model_dir)
        return result
