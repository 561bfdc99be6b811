"""How many optimizer steps a run takes, its learning-rate schedule, and the warnings a
schedule deserves.

``max_steps`` means what it means in Hugging Face's ``Trainer`` and in sentence-transformers:
when set, it is the number of optimizer steps and overrides ``epochs``; the batches cycle
over as many epochs as those steps need (each epoch reshuffled as usual, a resumed run
replaying the same order). Warm-up (``warmup_ratio``) and the decay are computed from that
total. Without ``max_steps`` a run takes ``epochs`` passes over the data.

Hugging Face's warm-up starts from lr 0, so with any warm-up the first step trains at lr 0
(AdamW's moments move, the weights do not); `schedule_warnings` says so, with the share of
the run it costs, and says how many epochs a ``max_steps`` beyond one pass means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers import get_scheduler

from dualview.train.config import OptimConfig


@dataclass(frozen=True)
class StepPlan:
    """A run's length: ``total_steps`` optimizer steps, read from ``epochs`` passes."""

    total_steps: int
    steps_per_epoch: int
    epochs: int  # passes the batch stream is opened for (the last may be read in part)
    max_steps: int | None = None

    @property
    def epochs_of_data(self) -> float:
        """Passes over the data the steps take (fractional: ``max_steps`` 30 of 8 -> 3.75)."""
        return self.total_steps / self.steps_per_epoch


def plan_steps(
    batches_per_epoch: int, accumulation: int, epochs: int, max_steps: int | None
) -> StepPlan:
    """``max_steps`` overrides ``epochs`` (Hugging Face's rule); a step is ``accumulation``
    batches, and an accumulation may span an epoch boundary, so the stream is opened for
    enough epochs to hold ``total_steps * accumulation`` batches. Data too small for one
    step gives ``steps_per_epoch`` 0 (the caller refuses it)."""
    per_epoch = batches_per_epoch // accumulation
    if max_steps is None or per_epoch == 0:
        return StepPlan(per_epoch * epochs, per_epoch, epochs)
    needed = math.ceil(max_steps * accumulation / batches_per_epoch)
    return StepPlan(max_steps, per_epoch, needed, max_steps)


def build_scheduler(optimizer: torch.optim.Optimizer, config: OptimConfig, total_steps: int):
    """Hugging Face's schedule (``linear``, ``cosine``, ``constant`` with warm-up) over
    ``total_steps``; warm-up is ``warmup_steps``, else ``warmup_ratio`` of the total."""
    warmup = config.warmup_steps or round(config.warmup_ratio * total_steps)
    name = "constant_with_warmup" if config.schedule == "constant" else config.schedule
    return get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total_steps)


#: Steps checked at each end of a schedule: warm-up and decay reach lr 0 only there.
EDGE_STEPS = 1000


def zero_lr_steps(scheduler, total_steps: int) -> list[int]:
    """The steps (1-based) that train at lr 0: step ``k`` uses the schedule's factor at
    ``k - 1`` (the scheduler steps after the update). Warm-up and decay reach 0 only at the
    ends of a schedule, so the first and last `EDGE_STEPS` are checked. Empty for a
    scheduler that is not a per-step ``LambdaLR`` (a DeepSpeed one)."""
    lambdas = getattr(scheduler, "lr_lambdas", None)
    if not lambdas:
        return []
    edges = sorted(
        set(range(min(total_steps, EDGE_STEPS)))
        | set(range(max(0, total_steps - EDGE_STEPS), total_steps))
    )
    return [step + 1 for step in edges if lambdas[0](step) == 0]


def _steps_text(steps: list[int]) -> str:
    """``step 1`` or ``steps 1, 2, 3, ...``."""
    shown = ", ".join(str(step) for step in steps[:3]) + (", ..." if len(steps) > 3 else "")
    return f"step {shown}" if len(steps) == 1 else f"steps {shown}"


#: Steps at lr 0 are announced when at least this share of the run's steps (a 3-step run with
#: warm-up: 1 of 3; a 40-step gold run with warmup_ratio 0.1: 1 of 40 is not).
ZERO_LR_NOTICE = 0.1


def schedule_warnings(plan: StepPlan, zero_steps: list[int], data: str) -> list[str]:
    """One ``warning:`` line per thing a user should know before the run: steps that train
    at lr 0 when they are a noticeable share of a run (`ZERO_LR_NOTICE`; warm-up's first
    step of a long run trains at lr 0 by design and is not announced), and a ``max_steps``
    beyond one pass over ``data`` (how many epochs it means)."""
    lines = []
    if zero_steps and len(zero_steps) >= ZERO_LR_NOTICE * plan.total_steps:
        verb = "trains" if len(zero_steps) == 1 else "train"
        nothing = ", so the run changes no weights" if len(zero_steps) == plan.total_steps else ""
        lines.append(
            f"warning: {len(zero_steps)} of {plan.total_steps} steps {verb} at lr 0 "
            f"({_steps_text(zero_steps)}: Hugging Face's warm-up starts from 0){nothing}; "
            "with optim.warmup_steps and optim.warmup_ratio 0 every step trains"
        )
    if plan.max_steps is not None and plan.total_steps > plan.steps_per_epoch:
        per_epoch = plan.steps_per_epoch
        lines.append(
            f"warning: {data}: max_steps {plan.total_steps} is more than one pass over the "
            f"data ({per_epoch} step{'s' if per_epoch != 1 else ''} per epoch): training runs "
            f"{plan.epochs_of_data:.3g} epochs"
        )
    return lines
