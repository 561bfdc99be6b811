"""The stage graph of an experiment: each stage calls the library function of its step.

```
data (records | LLM seeding) ─▶ synth ─▶ [verify] ─▶ mix-<name> ...
    ─▶ train-<mix>[-<backbone>] ... ─▶ eval ─▶ report
```

Every stage writes into its own folder (see `dualview.pipeline.stages`), so a rerun
skips what is finished and a killed stage resumes: synthesis through its cache, training
from its last checkpoint, evaluation from the result files already written.

The LLM stages (seeding, reversal, verification) keep their answers in one cache per task
under ``RUN_DIR/llm-cache/`` rather than in the stage folder, and their stage key includes
the task's fingerprint (prompt template hash, task settings, parser version). So a new
dualview release whose parser judges answers differently reruns those stages in new folders,
and the new parser re-judges the cached answers without asking the LLM again
(`dualview.synth.runner.Runner`).
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from dualview.config import (
    ConfigError,
    apply_overrides,
    flag_overrides,
    format_validation_error,
    read_yaml,
    validate_config,
)
from dualview.data import formats
from dualview.data.bm25 import BM25_KINDS
from dualview.data.jsonl import iter_records
from dualview.data.mix import MixConfig, build_mix, preset_config
from dualview.data.pairing import ExtraDv, read_pairs
from dualview.data.schema import Record
from dualview.errors import DualviewError, Interrupted
from dualview.eval.benchmarks import data_path
from dualview.io.atomic import AtomicJsonlWriter, atomic_write_text, write_jsonl
from dualview.io.files import count_lines
from dualview.models.saved import saved_kind
from dualview.pipeline.experiment import GOLD_PREFIX, Experiment, MixSpec, SourceSpec
from dualview.pipeline.params import (
    EvalParams,
    MixParams,
    RecordsParams,
    SeedParams,
    SynthParams,
    TrainParams,
    VerifyParams,
)
from dualview.pipeline.stages import Pipeline, Stage
from dualview.run_folder import CONFIGURATIONS_FILE, manifest_path_text

if TYPE_CHECKING:
    from dualview.train.config import TrainConfig

LLM_CACHE = "llm-cache"  # RUN_DIR/llm-cache/<task>.cache.jsonl: answers of every LLM stage
RECORDS = "records.jsonl"  # every source record kept (orig + plain)
ORIG = "orig.jsonl"  # the orig records handed to synthesis
DV = "dv.jsonl"  # the dual-view records that training may use
# Mix size ``auto`` before the dual views exist (`resolve_stages`): any even size checks
# the rest of the mix config.
AUTO_SIZE_CHECK = 2


def read_source(spec: SourceSpec) -> Iterator[Record]:
    """Records of a source spec: the gold set or a file in any supported format."""
    if spec.path.startswith(GOLD_PREFIX):
        from dualview.data.gold_folds import load_gold_source

        records: Any = iter(load_gold_source(spec.path[len(GOLD_PREFIX) :]))
    else:
        records = formats.get_reader(spec.format)(spec.path)
    kept = (r for r in records if r.view in spec.views)
    return islice(kept, spec.limit) if spec.limit else kept


def _write_orig(out: Path, limit: int | None) -> int:
    origs = (r for r in iter_records(out / RECORDS) if r.view == "orig")
    return write_jsonl(out / ORIG, islice(origs, limit) if limit else origs)


def _job_config(task: str, job: dict[str, Any]) -> Any:
    from dualview.synth.jobs import job_model

    return validate_config(job_model(task), job, f"experiment {task} job")


def task_fingerprint(task: str, job: dict[str, Any]) -> dict[str, Any]:
    """What a stage key must know of an LLM task beyond its YAML: the prompt template's
    hash and the parser version of the installed dualview."""
    from dualview.synth.jobs import build_task

    return build_task(task, _job_config(task, job)).fingerprint()


def llm_cache_path(exp: Experiment, task: str, reuse_from: tuple[Path, ...] = ()) -> Path:
    """``RUN_DIR/llm-cache/<task>.cache.jsonl``; a run that reuses stages of other runs starts
    it as a copy of theirs (entries are content-addressed, so a copy can only add hits)."""
    cache = exp.resolved_run_dir() / LLM_CACHE / f"{task}.cache.jsonl"
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        for other in reuse_from:
            theirs = other / LLM_CACHE / cache.name
            if theirs.is_file():
                partial = cache.with_name(f".{cache.name}.copying")
                shutil.copyfile(theirs, partial)
                partial.rename(cache)
                break
    return cache


def _run_job(
    exp: Experiment,
    task: str,
    job: dict[str, Any],
    source: Path,
    out: Path,
    reuse_from: tuple[Path, ...] = (),
) -> dict[str, Any]:
    from dualview.synth.jobs import run_job

    config = _job_config(task, job)
    if config.runner.cache is None:
        cache = llm_cache_path(exp, task, reuse_from)
        config = config.model_copy(
            update={"runner": config.runner.model_copy(update={"cache": cache})}
        )
    return run_job(task, config, source, out).to_json()


# -- stage functions -------------------------------------------------------------------------


def instructions_stage(exp: Experiment):
    def run(out: Path, _: dict[str, Path]) -> dict[str, Any]:
        assert exp.instructions is not None
        with AtomicJsonlWriter(out / RECORDS) as records, AtomicJsonlWriter(out / DV) as dvs:
            for record in read_source(exp.instructions):
                (dvs if record.view == "dv" else records).write(record)
        counts = {"records": records.count, "dv": dvs.count}
        return {**counts, "orig": _write_orig(out, exp.synthesis.limit)}

    return run


def seed_stage(exp: Experiment, reuse_from: tuple[Path, ...] = ()):
    def run(out: Path, _: dict[str, Path]) -> dict[str, Any]:
        assert exp.seeding is not None
        plain = out / "plain.jsonl"
        write_jsonl(plain, read_source(exp.seeding.source))
        stats = _run_job(exp, "seed", exp.seeding.job, plain, out / "seeded.jsonl", reuse_from)
        seeded = list(iter_records(out / "seeded.jsonl"))
        write_jsonl(out / RECORDS, [*iter_records(plain), *seeded])
        return {"seed_stats": stats, "orig": _write_orig(out, exp.synthesis.limit)}

    return run


def synth_stage(exp: Experiment, reuse_from: tuple[Path, ...] = ()):
    def run(out: Path, up: dict[str, Path]) -> dict[str, Any]:
        source = up["data"] / ORIG
        job = exp.synthesis.job
        stats = _run_job(exp, "reverse", job, source, out / "reversed.jsonl", reuse_from)
        dvs = [r for r in iter_records(out / "reversed.jsonl") if r.view == "dv"]
        return {"stats": stats, "dv": write_jsonl(out / DV, dvs)}

    return run


def write_verify_units(
    orig_file: Path, dv_file: Path, out: Path, extra_dv: ExtraDv = "error"
) -> int:
    """The verification units: each orig record followed by its dv record, paired by the
    one rule of `dualview.data.pairing` (a second dv of one orig is an error naming both
    lines unless ``extra_dv`` chooses); returns the number of units."""
    pairing = read_pairs([orig_file, dv_file], extra_dv)
    write_jsonl(out, (record for pair in pairing.pairs for record in pair))
    return len(pairing.pairs)


def verify_stage(exp: Experiment, dv_source: str, reuse_from: tuple[Path, ...] = ()):
    def run(out: Path, up: dict[str, Path]) -> dict[str, Any]:
        write_verify_units(up["data"] / ORIG, up[dv_source] / DV, out / "units.jsonl", exp.extra_dv)
        units_file, kept_file = out / "units.jsonl", out / "kept.jsonl"
        stats = _run_job(exp, "verify", exp.verification.job, units_file, kept_file, reuse_from)
        kept = [r for r in iter_records(out / "kept.jsonl") if r.view == "dv"]
        return {"stats": stats, "dv": write_jsonl(out / DV, kept)}

    return run


def mix_size(spec: MixSpec, dv_file: Path | None) -> int:
    """The mix size: as given, or for ``auto`` twice the dual-view records (capped, even);
    `AUTO_SIZE_CHECK` before they exist (``dv_file`` None: a check of the config)."""
    if spec.size != "auto":
        assert isinstance(spec.size, int)
        return spec.size
    if dv_file is None:
        return AUTO_SIZE_CHECK
    size = 2 * count_lines(dv_file)
    if spec.max_size is not None:
        size = min(size, spec.max_size - spec.max_size % 2)
    if size == 0:
        raise DualviewError(f"mix {spec.name}: no dual-view records, so size auto is 0")
    return size


def mix_config(exp: Experiment, spec: MixSpec, dv_file: Path | None) -> MixConfig:
    """The mix's validated config; errors name the experiment's source and the mix
    (``dv_file`` None: a check before the dual views exist, see `mix_size`)."""
    where = f"{exp.source}: mixes: {spec.name}"
    if spec.preset is None:
        data = {"name": spec.name, "seed": exp.seed, "extra_dv": exp.extra_dv}
        return validate_config(MixConfig, {**data, **(spec.config or {})}, where)
    try:
        config = preset_config(
            spec.preset,
            mix_size(spec, dv_file),
            seed=exp.seed,
            negatives=exp.negatives,
            extra_dv=exp.extra_dv,
        )
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return config.model_copy(update={"name": spec.name})


def mix_stage(exp: Experiment, spec: MixSpec, dv_stage: str):
    def run(out: Path, up: dict[str, Path]) -> dict[str, Any]:
        dv_file = up[dv_stage] / DV
        config = mix_config(exp, spec, dv_file)
        result = build_mix([up["data"] / RECORDS, dv_file], config, out / "train.jsonl")
        return {"size": config.size, "counts": result.counts}

    return run


def _section(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``data[key]``, a mapping (made empty when missing)."""
    section = data.setdefault(key, {})
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: {key}: expected a mapping, not {section!r}")
    return section


def train_config_dict(exp: Experiment, backbone: str | None) -> dict[str, Any]:
    """The base training YAML with the experiment's overrides (and backbone) applied.

    The trainer's seed is the experiment's ``seed`` (so ``--set seed=N`` changes the
    initialisation, data order and dropout as well as the mixes' sampling) unless
    ``training.overrides.seed`` gives another; a seed in the base file is replaced.
    """
    data = read_yaml(exp.training.base) if exp.training.base else exp.training.config or {}
    data = copy.deepcopy(data)
    data["seed"] = exp.seed
    data = apply_overrides(data, flag_overrides(exp.training.overrides))
    if backbone is not None:
        _section(data, "model", f"{exp.source}: training")["name_or_path"] = backbone
    return data


def train_config(
    exp: Experiment, backbone: str | None, train_file: Path, output_dir: Path
) -> TrainConfig:
    """The training stage's validated config; errors name the experiment's source."""
    from dualview.train.config import TrainConfig

    where = f"{exp.source}: training"
    data = train_config_dict(exp, backbone)
    _section(data, "data", where)["train_file"] = str(train_file)
    data["output_dir"] = str(output_dir)
    return validate_config(TrainConfig, data, where)


def backbones(exp: Experiment) -> dict[str, str | None]:
    """Backbone label -> model (``{"": None}``: the training config's own model)."""
    return dict(exp.training.backbones) or {"": None}


def train_stage(
    exp: Experiment, backbone: str | None, mix_stage_name: str, allow_config_change: bool = False
):
    """Train on the mix; a partial stage resumes from its checkpoint, which stops on a changed
    training config unless ``allow_config_change`` (`dualview.train.config_drift`)."""

    def run(out: Path, up: dict[str, Path]) -> dict[str, Any]:
        from dualview.hub.model_card import write_model_card
        from dualview.train.trainer import train

        config = train_config(exp, backbone, up[mix_stage_name] / "train.jsonl", out)
        resume = (out / "checkpoints").exists()
        # the folder is this stage's own: what a run killed before its first checkpoint left
        # (its log) is started over, never refused
        result = train(
            config, resume=resume, allow_config_change=allow_config_change, overwrite=not resume
        )
        if result.interrupted:
            raise Interrupted(f"{out}: training stopped at step {result.steps}; rerun to resume")
        if result.model_dir is not None:
            write_model_card(result.model_dir)
        # A finished stage is never resumed (a changed setting gives a new stage key), so its
        # checkpoints (weights and optimizer state, about 3x the model) would only fill the
        # disk: 72 MiniLM stages of a sweep took 64 GB with them.
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        return {"steps": result.steps, "resumed": resume, "last_loss": result.last_loss}

    return run


def base_model_name(exp: Experiment, backbone: str | None) -> str:
    if backbone is not None:
        return backbone
    return str(train_config_dict(exp, None).get("model", {}).get("name_or_path", "embedded:minilm"))


def eval_stage(exp: Experiment, trained: dict[str, str], bases: dict[str, str]):
    """``trained``: row label -> train stage name; ``bases``: row label -> model name."""

    def run(out: Path, up: dict[str, Path]) -> dict[str, Any]:
        from dualview.eval.run import EvalSettings, Summary, evaluate, write_summary
        from dualview.eval.two_stage import RerankSettings, reranked_name
        from dualview.train.trainer import MODEL_DIR

        configurations = dict(bases) if exp.evaluation.include_base else {}
        for label, stage_name in trained.items():
            configurations[label] = str(up[stage_name] / MODEL_DIR)
        settings = EvalSettings(
            batch_size=exp.evaluation.batch_size, query_template=exp.evaluation.query_template
        )
        # each model as its kind is evaluated: a first stage, or a reranker over one
        rerankers = {k: v for k, v in configurations.items() if saved_kind(v).scores_pairs}
        encoders = [v for k, v in configurations.items() if k not in rerankers]
        spec = exp.evaluation.rerank
        bm25 = spec.first_stage in BM25_KINDS
        rerank = RerankSettings(
            rerankers=list(rerankers.values()),
            first_stage=spec.first_stage if bm25 else "model",
            top_k=spec.top_k,
            weights=[spec.interpolate],
            precision=spec.precision,
        )
        first_stage = [] if bm25 else [spec.first_stage]
        first = rerank.first_stages(first_stage)[0]
        for label, folder in rerankers.items():  # the report finds a reranked column by name
            configurations[label] = reranked_name(folder, first, spec.interpolate)
        loss_logs = {  # relative to the run folder (the report reads it from anywhere)
            label: manifest_path_text(up[stage] / "train_log.jsonl", out.parent)
            for label, stage in trained.items()
        }
        atomic_write_text(
            out / CONFIGURATIONS_FILE,
            json.dumps({"models": configurations, "loss_logs": loss_logs}, indent=2),
        )
        benchmarks, folder = exp.evaluation.benchmarks, out / "eval"
        precision = exp.evaluation.precision
        summaries = []
        if encoders:
            summaries.append(evaluate(encoders, benchmarks, folder, settings, precision=precision))
        if rerankers:
            summaries.append(
                evaluate(
                    first_stage, benchmarks, folder, settings, precision=precision, rerank=rerank
                )
            )
        summary = Summary.merged(summaries)  # one summary of every column
        write_summary(summary, folder)
        return {"models": len(configurations), "benchmarks": summary.benchmarks}

    return run


def report_stage(exp: Experiment):
    def run(out: Path, up: dict[str, Path]) -> dict[str, Any]:
        from dualview.report.run_report import report_from_eval_stage

        files = report_from_eval_stage(up["eval"], out, title=exp.name)
        return {"report": str(files.markdown)}

    return run


# -- graph -----------------------------------------------------------------------------------


def _local_benchmark_inputs(specs: list[str]) -> list[Path]:
    paths = []
    for spec in specs:
        path = data_path(spec)
        if path is not None:
            paths.append(path)
    return paths


def data_stage(exp: Experiment, reuse: tuple[Path, ...] = ()) -> Stage:
    """The records the experiment starts from: read from a source, or seeded by the LLM."""
    if exp.instructions is not None:
        return Stage(
            "data",
            instructions_stage(exp),
            params=RecordsParams(
                instructions=exp.instructions.model_dump(), limit=exp.synthesis.limit
            ),
            inputs=exp.instructions.input_files(),
            description="read the instruction records",
        )
    assert exp.seeding is not None
    return Stage(
        "data",
        seed_stage(exp, reuse),
        params=SeedParams(
            seeding=exp.seeding.model_dump(),
            limit=exp.synthesis.limit,
            task=task_fingerprint("seed", exp.seeding.job),
        ),
        inputs=exp.seeding.source.input_files(),
        description="seed instructions from plain qrels with the LLM",
    )


def dual_view_stages(exp: Experiment, reuse: tuple[Path, ...] = ()) -> tuple[list[Stage], str]:
    """The synthesis and verification stages, and the name of the stage whose ``dv.jsonl``
    training uses (``data`` when the source gives the dual views, e.g. the gold set)."""
    stages: list[Stage] = []
    dv_stage = "data"
    if exp.synthesis.enabled:
        stages.append(
            Stage(
                "synth",
                synth_stage(exp, reuse),
                params=SynthParams(
                    job=exp.synthesis.job, task=task_fingerprint("reverse", exp.synthesis.job)
                ),
                after=["data"],
                description="reverse instruction polarity (dual views)",
            )
        )
        dv_stage = "synth"
    if exp.verification.enabled:
        stages.append(
            Stage(
                "verify",
                verify_stage(exp, dv_stage, reuse),
                params=VerifyParams(
                    job=exp.verification.job,
                    task=task_fingerprint("verify", exp.verification.job),
                    extra_dv=exp.extra_dv,
                ),
                after=list(dict.fromkeys(["data", dv_stage])),
                description="LLM judge keeps swaps that hold",
            )
        )
        dv_stage = "verify"
    return stages, dv_stage


def training_stages(
    exp: Experiment, dv_stage: str, allow_config_change: bool = False
) -> tuple[list[Stage], dict[str, str]]:
    """One mix stage per mix and one training stage per mix and backbone; also the report
    row label of each training stage."""
    stages: list[Stage] = []
    trained: dict[str, str] = {}
    for spec in exp.mixes:
        mix_name = f"mix-{spec.name}"
        stages.append(
            Stage(
                mix_name,
                mix_stage(exp, spec, dv_stage),
                params=MixParams(
                    mix=spec.model_dump(mode="json"),
                    seed=exp.seed,
                    negatives=exp.negatives.model_dump(mode="json"),
                    extra_dv=exp.extra_dv,
                ),
                after=list(dict.fromkeys(["data", dv_stage])),
                description=f"build the {spec.name} training mix",
            )
        )
        for label, backbone in backbones(exp).items():
            stage_name = f"train-{spec.name}" + (f"-{label}" if label else "")
            stages.append(
                Stage(
                    stage_name,
                    train_stage(exp, backbone, mix_name, allow_config_change),
                    params=TrainParams(train=train_config_dict(exp, backbone)),
                    after=[mix_name],
                    description=f"train {label or 'the model'} on {spec.name}",
                )
            )
            trained[spec.name + (f" ({label})" if label else "")] = stage_name
    return stages, trained


def evaluation_stages(exp: Experiment, trained: dict[str, str]) -> list[Stage]:
    """Evaluation of the base models and the trained ones, then the report."""
    bases = {
        ("base" + (f" ({label})" if label else "")): base_model_name(exp, backbone)
        for label, backbone in backbones(exp).items()
    }
    evaluation = Stage(
        "eval",
        eval_stage(exp, trained, bases),
        params=EvalParams.of(exp.evaluation, bases),
        inputs=_local_benchmark_inputs(exp.evaluation.benchmarks),
        after=list(trained.values()),
        description="evaluate base and trained models",
    )
    report = Stage("report", report_stage(exp), after=["eval"], description="tables and plots")
    return [evaluation, report]


def _check_format(spec: SourceSpec | None, where: str) -> None:
    """A source's reader exists (the gold set needs none)."""
    if spec is not None and not spec.path.startswith(GOLD_PREFIX):
        try:
            formats.get_reader(spec.format)
        except DualviewError as exc:
            raise ConfigError(f"{where}: format: {exc}") from None


def _llm_jobs(exp: Experiment) -> list[tuple[str, str, dict[str, Any]]]:
    """``(experiment section, task, job)`` of each LLM stage that runs."""
    jobs = [("seeding", "seed", exp.seeding.job)] if exp.seeding is not None else []
    if exp.synthesis.enabled:
        jobs.append(("synthesis", "reverse", exp.synthesis.job))
    if exp.verification.enabled:
        jobs.append(("verification", "verify", exp.verification.job))
    return jobs


def resolve_stages(exp: Experiment) -> dict[str, Any]:
    """Build and validate every config the stages of ``exp`` will build (source formats,
    LLM jobs, mixes, training configs with their overrides), running nothing: a dry run
    fails where the run would, with the same located error. Returns the experiment as its
    stages see it (JSON-able; jobs, mixes and the training config per backbone label
    resolved with their defaults; no run folder): two experiments with equal settings run
    the same stages."""
    where = exp.source
    _check_format(exp.instructions, f"{where}: instructions")
    _check_format(exp.seeding.source if exp.seeding else None, f"{where}: seeding: source")
    settings = exp.model_dump(mode="json", exclude={"run_dir"})
    for section, task, job in _llm_jobs(exp):
        settings[section]["job"] = _job_config(task, job).model_dump(mode="json")
    settings["mixes"] = [
        {
            **spec.model_dump(mode="json"),
            "config": mix_config(exp, spec, None).model_dump(mode="json"),
        }
        for spec in exp.mixes
    ]
    placeholder = Path("<train-stage>")
    settings["training"] = {
        label: train_config(exp, backbone, placeholder / "train.jsonl", placeholder).model_dump(
            mode="json", exclude={"output_dir": True, "data": {"train_file"}}
        )
        for label, backbone in backbones(exp).items()
    }
    return settings


def build_pipeline(
    exp: Experiment, reuse_from: list[Path] | None = None, allow_config_change: bool = False
) -> Pipeline:
    """All stages of ``exp`` under its run folder (``reuse_from``: see `Pipeline`;
    ``allow_config_change``: a training stage resumes under a changed training config, e.g.
    one that a newer dualview resolves with new defaults, and records the differences).
    Every stage's config is validated first (`resolve_stages`), so nothing runs (and a dry
    run shows no plan) when one is wrong."""
    resolve_stages(exp)
    reuse = tuple(Path(p) for p in reuse_from or [])
    dual_views, dv_stage = dual_view_stages(exp, reuse)
    training, trained = training_stages(exp, dv_stage, allow_config_change)
    stages = [data_stage(exp, reuse), *dual_views, *training, *evaluation_stages(exp, trained)]
    return Pipeline(exp.resolved_run_dir(), stages, reuse_from)
