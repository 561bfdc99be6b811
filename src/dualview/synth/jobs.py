"""A synthesis job = task + backend + sampling + runner settings, loadable from one YAML file.

```yaml
backend: {kind: openai, model: Qwen/Qwen2.5-7B-Instruct, base_url: http://gpu1:8000/v1}
sampling: {temperature: 0.0, max_tokens: 512}
runner: {concurrency: 64, shard: 0/4}
task: {n_star: random, seed: 13}        # the task's own settings
```
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path

from pydantic import Field, SerializeAsAny, create_model

from dualview.config import StrictModel, apply_overrides, load_config, validate_config
from dualview.data import formats
from dualview.data.schema import Record
from dualview.io.paths import check_outputs
from dualview.registry import Registry
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.estimate import Estimate, TokenCounter, estimate_task
from dualview.synth.job_stats import JobStats
from dualview.synth.poison import PoisonConfig, PoisonTask
from dualview.synth.reverse import ReverseConfig, ReverseTask
from dualview.synth.runner import RunnerConfig, check_failures, job_outputs, make_runner
from dualview.synth.seed import SeedConfig, SeedTask
from dualview.synth.task import Task, TaskKind
from dualview.synth.verify import VerifyConfig, VerifyTask

#: Task name (``dualview NAME``, the ``task`` of `run_job`) -> `TaskKind`. Plugins: the
#: entry-point group ``dualview.tasks`` or ``TASKS.register("name", TaskKind(...))``.
TASKS: Registry[TaskKind] = Registry(
    "synthesis task",
    field="task",
    group="dualview.tasks",
    entries={
        "reverse": TaskKind(
            ReverseConfig,
            ReverseTask,
            "Dual-view polarity reversal: one dv record per orig record with an instruction "
            "negative.",
        ),
        "seed": TaskKind(
            SeedConfig,
            SeedTask,
            "Write instructions and instruction negatives for plain (query, positive) records.",
        ),
        "poison": TaskKind(
            PoisonConfig,
            PoisonTask,
            "InF-IR poisoning: changed instruction and query, three records per input.",
        ),
        "verify": TaskKind(
            VerifyConfig,
            VerifyTask,
            "Multiple-choice LLM judge: keep units whose intended passages win; swap accuracy.",
        ),
    },
)


class JobBase(StrictModel):
    # SerializeAsAny: a dump holds the settings of the backend's own kind
    backend: SerializeAsAny[BackendConfig] = Field(default_factory=BackendConfig)
    sampling: SamplingParams = SamplingParams()
    runner: RunnerConfig = RunnerConfig()


def job_model(task_name: str) -> type[JobBase]:
    """The strict config model of a job running ``task_name``."""
    config_cls = TASKS.get(task_name).config
    return create_model(  # type: ignore[call-overload]
        f"{task_name.capitalize()}Job", __base__=JobBase, task=(config_cls, config_cls())
    )


def load_job(task_name: str, path: str | Path | None, overrides: list[str]) -> JobBase:
    """The job config from YAML (optional) with ``key.path=value`` overrides applied."""
    model = job_model(task_name)
    if path is not None:
        return load_config(model, path, overrides)
    return validate_config(model, apply_overrides({}, overrides), "command line")


def build_task(task_name: str, job: JobBase) -> Task:
    return TASKS.get(task_name).build(job.task)  # type: ignore[attr-defined]


def read_input(
    source: str | Path, input_format: str = "dualview", limit: int | None = None
) -> Iterator[Record]:
    """The records of ``source`` (in ``input_format``); only the first ``limit`` if given."""
    records = formats.get_reader(input_format)(source)
    return islice(records, limit) if limit is not None else records


def run_job(
    task_name: str,
    job: JobBase,
    source: str | Path,
    out: str | Path,
    input_format: str = "dualview",
    read: Sequence[str | Path | None] = (),
    limit: int | None = None,
) -> JobStats:
    """Run ``task_name`` over ``source`` (its first ``limit`` records, if given) into
    ``out``; returns the stats. None of the files the run writes (OUT, its side files, the
    cache) may be ``source`` or another file the job ``read`` (its config); a run whose units
    all failed with backend errors (or more than ``runner.max_error_share`` of them) raises
    `JobFailed` after writing its files."""
    check_outputs(job_outputs(Path(out), job.runner), [source, *read])
    task = build_task(task_name, job)
    formats.get_reader(input_format)  # an unknown format fails before the runner starts
    runner = make_runner(task, job.backend, job.sampling, job.runner)

    def units():  # type: ignore[no-untyped-def]
        return task.units(read_input(source, input_format, limit))

    stats = runner.run(units, out, input_label=str(source))
    check_failures(stats, Path(out), job.runner.max_error_share)
    return stats


def estimate_job(
    task_name: str,
    job: JobBase,
    source: str | Path,
    input_format: str = "dualview",
    counter: TokenCounter | None = None,
    limit: int | None = None,
) -> Estimate:
    """What running ``task_name`` over ``source`` (its first ``limit`` records, if given)
    would cost (`dualview.synth.estimate`); nothing is sent and nothing written. Priced when
    the job's runner names prices."""
    task = build_task(task_name, job)
    counter = counter or TokenCounter.for_backend(job.backend)
    estimate = estimate_task(task, read_input(source, input_format, limit), job.sampling, counter)
    price_in, price_out = job.runner.price_in_per_million, job.runner.price_out_per_million
    if price_in is not None or price_out is not None:
        estimate.price(price_in or 0.0, price_out or 0.0)
    return estimate
