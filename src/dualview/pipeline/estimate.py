"""``dualview run --dry-run``: the cost of an experiment's LLM stages, before they run.

The estimate walks the experiment's stage graph (`dualview.pipeline.build`): every stage
whose params are an `LLMStageParams` is estimated (`dualview.synth.estimate`) on the records
its upstream stages would write, in run order: seed (when the experiment seeds), reverse
(synth), verify. A later stage reads what the earlier one would write with the stand-in's
well-formed answers, so it assumes every LLM answer succeeds: verify's figure is an upper
bound (rejected or impossible reversals write no dual view to judge). The estimate is for a
run from scratch; cached stages cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from dualview.config import validate_config
from dualview.data.schema import Record
from dualview.errors import DualviewError
from dualview.pipeline.build import build_pipeline, read_source
from dualview.pipeline.experiment import Experiment
from dualview.pipeline.params import (
    LLMStageParams,
    RecordsParams,
    SeedParams,
    SynthParams,
    VerifyParams,
)
from dualview.pipeline.stages import Stage
from dualview.synth.estimate import Estimate, TokenCounter, estimate_task
from dualview.synth.jobs import build_task, job_model


@dataclass
class Written:
    """What a stage would write, as the estimate sees it: orig records and dual views."""

    orig: list[Record] = field(default_factory=list)
    dv: list[Record] = field(default_factory=list)


Flow = dict[str, Written]  # stage name -> what it would write
Step = Callable[[Experiment, Stage, Flow], tuple[Estimate | None, Written]]


def _estimate(stage: Stage, records: list[Record]) -> Estimate:
    params = stage.params
    assert isinstance(params, LLMStageParams)
    task = params.TASK
    config = validate_config(job_model(task), params.llm_job(), f"experiment {task} job")
    counter = TokenCounter.for_backend(config.backend)
    return estimate_task(
        build_task(task, config), records, config.sampling, counter, keep_outputs=True
    )


def _records(data: list[dict[str, Any]], view: str) -> list[Record]:
    return [r for r in (Record.model_validate(item) for item in data) if r.view == view]


def _limited(records: list[Record], limit: int | None) -> list[Record]:
    """The orig records handed to synthesis (the data stage's ``orig.jsonl``)."""
    return list(islice(records, limit)) if limit else records


def _instructions(exp: Experiment, stage: Stage, flow: Flow) -> tuple[None, Written]:
    assert exp.instructions is not None
    source = list(read_source(exp.instructions))
    origs = _limited([r for r in source if r.view == "orig"], exp.synthesis.limit)
    return None, Written(origs, [r for r in source if r.view == "dv"])


def _seed(exp: Experiment, stage: Stage, flow: Flow) -> tuple[Estimate, Written]:
    assert exp.seeding is not None
    seeded = _estimate(stage, list(read_source(exp.seeding.source)))
    return seeded, Written(_limited(_records(seeded.outputs, "orig"), exp.synthesis.limit))


def _reverse(exp: Experiment, stage: Stage, flow: Flow) -> tuple[Estimate, Written]:
    origs = flow[stage.after[0]].orig
    reversed_ = _estimate(stage, origs)
    return reversed_, Written(origs, _records(reversed_.outputs, "dv"))


def _verify(exp: Experiment, stage: Stage, flow: Flow) -> tuple[Estimate, Written]:
    """Each orig record of ``data`` with its dual view from the stage that gives them (the
    first and last upstream stage)."""
    origs, dvs = flow[stage.after[0]].orig, flow[stage.after[-1]].dv
    by_parent = {r.parent_id: r for r in dvs}
    units = [x for orig in origs if orig.id in by_parent for x in (orig, by_parent[orig.id])]
    return _estimate(stage, units), Written(origs, dvs)


#: params kind -> how the estimate follows the stage (the stages up to the dual views)
STEPS: dict[type, Step] = {
    RecordsParams: _instructions,
    SeedParams: _seed,
    SynthParams: _reverse,
    VerifyParams: _verify,
}


def estimate_experiment(exp: Experiment, stages: Sequence[Stage] | None = None) -> list[Estimate]:
    """One `Estimate` per LLM stage of ``exp`` (its ``stages``, default: built), in run
    order."""
    flow: Flow = {}
    estimates: list[Estimate] = []
    for stage in build_pipeline(exp).stages if stages is None else stages:
        step = STEPS.get(type(stage.params))
        if step is None:
            if isinstance(stage.params, LLMStageParams):
                raise DualviewError(f"stage {stage.name}: the dry run cannot estimate its task")
            continue
        estimate, flow[stage.name] = step(exp, stage, flow)
        if estimate is not None:
            estimates.append(estimate)
    return estimates
