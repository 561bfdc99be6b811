"""``dualview run --dry-run``: the cost of an experiment's LLM stages, before they run.

The stages are estimated in order on the experiment's own inputs (`dualview.synth.estimate`):
seed (when the experiment seeds), reverse (synth), verify. A later stage reads what the
earlier one would write with the stand-in's well-formed answers, so it assumes every LLM
answer succeeds: verify's figure is an upper bound (rejected or impossible reversals write
no dual view to judge). The estimate is for a run from scratch; cached stages cost nothing.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from dualview.config import validate_config
from dualview.data.schema import Record
from dualview.pipeline.build import read_source
from dualview.pipeline.experiment import Experiment
from dualview.synth.estimate import Estimate, TokenCounter, estimate_task
from dualview.synth.jobs import build_task, job_model


def _estimate(task: str, job: dict[str, Any], records: list[Record]) -> Estimate:
    config = validate_config(job_model(task), job, f"experiment {task} job")
    counter = TokenCounter.for_backend(config.backend)
    return estimate_task(
        build_task(task, config), records, config.sampling, counter, keep_outputs=True
    )


def _records(data: list[dict[str, Any]]) -> list[Record]:
    return [Record.model_validate(item) for item in data]


def _limited(records: list[Record], limit: int | None) -> list[Record]:
    return list(islice(records, limit)) if limit else records


def estimate_experiment(exp: Experiment) -> list[Estimate]:
    """One `Estimate` per LLM stage of ``exp``, in run order."""
    estimates: list[Estimate] = []
    if exp.seeding is not None:
        seeded = _estimate("seed", exp.seeding.job, list(read_source(exp.seeding.source)))
        estimates.append(seeded)
        origs = [r for r in _records(seeded.outputs) if r.view == "orig"]
        given: list[Record] = []
    else:
        assert exp.instructions is not None
        source = list(read_source(exp.instructions))
        origs = [r for r in source if r.view == "orig"]
        given = [r for r in source if r.view == "dv"]
    origs = _limited(origs, exp.synthesis.limit)
    dvs = given  # without synthesis, the dual views the source carries
    if exp.synthesis.enabled:
        reversed_ = _estimate("reverse", exp.synthesis.job, origs)
        estimates.append(reversed_)
        dvs = [r for r in _records(reversed_.outputs) if r.view == "dv"]
    if exp.verification.enabled:
        by_parent = {r.parent_id: r for r in dvs}
        units = [x for orig in origs if orig.id in by_parent for x in (orig, by_parent[orig.id])]
        estimates.append(_estimate("verify", exp.verification.job, units))
    return estimates
