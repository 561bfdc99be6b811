"""The Python API: the whole job in a few calls, with objects instead of files.

``import dualview`` loads this module on first use of one of its names (`dualview.__init__`),
so importing dualview stays fast::

    import dualview

    dv = dualview.synthesize("orig.jsonl", backend="local")  # dual views by the embedded LLM
    model = dualview.train({"output_dir": "runs/nb"}, dv.records)
    results = dualview.evaluate(model, ["paired=data/paired"])  # nothing written
    print(results.table())

Each function is a thin layer over the library function the CLI calls (named in its
docstring): records and configs may be objects, dicts or paths, and results come back as
objects. Errors are the library's located `dualview.errors.DualviewError`.
"""

from __future__ import annotations

import copy
import hashlib
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from functools import partial
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel
from rich.console import Console

from dualview import API
from dualview.config import apply_overrides, flag_overrides, read_yaml, validate_config
from dualview.data.jsonl import iter_records, parse_record
from dualview.data.schema import Record
from dualview.errors import ConfigError
from dualview.io.atomic import write_jsonl
from dualview.io.files import iter_json_lines
from dualview.models.config import check_query_template
from dualview.report import ReportFiles, ReportOptions
from dualview.report.compare import parse_pair
from dualview.report.table import parse_prefixes
from dualview.retrieval.mine import MineConfig
from dualview.synth.backends.base import BACKENDS, BackendConfig
from dualview.synth.jobs import TASKS, JobBase, job_model
from dualview.synth.runner import side_path
from dualview.train.config import TrainConfig

if TYPE_CHECKING:  # torch-heavy: imported where they are used
    from dualview.eval.run import EvalSettings, Summary
    from dualview.pipeline.experiment import Experiment

__all__ = list(API)  # the names `import dualview` offers (one list, in dualview/__init__.py)

#: Records: a file (any format `read_records` reads) or Record objects or dicts.
RecordsLike = str | PathLike[str] | Iterable[Record | Mapping[str, Any]]
#: A config: the config object, a dict of its fields, or a YAML file.
ConfigLike = BaseModel | Mapping[str, Any] | str | PathLike[str]
#: Config overrides: ``["key.path=value", ...]`` (as ``--set``) or ``{"key.path": value}``.
Overrides = Sequence[str] | Mapping[str, Any]
#: The name the stub backend answers to (`dualview.synth.testing.StubServer`).
STUB_BACKEND = "stub"

ModelT = TypeVar("ModelT", bound=BaseModel)


# -- shared helpers ------------------------------------------------------------------------


def _is_path(value: object) -> bool:
    """Whether ``value`` names a file or folder (a str or an ``os.PathLike``)."""
    return isinstance(value, str | PathLike)


def _override_list(overrides: Overrides) -> list[str]:
    """``overrides`` as ``--set`` items (a dict's values written as JSON, which is YAML)."""
    if isinstance(overrides, Mapping):
        plain = {k: str(v) if isinstance(v, PathLike) else v for k, v in overrides.items()}
        return flag_overrides(plain)
    return list(overrides)


def _config_data(
    schema: type[BaseModel], config: ConfigLike | None, overrides: Overrides, **fields: Any
) -> tuple[dict[str, Any], str]:
    """``config`` (object, dict, YAML file or None) as the dict of a ``schema`` with
    ``overrides`` and then the given ``fields`` (``a__b`` for ``a.b``; None: left as is)
    applied, and the source its errors name."""
    if isinstance(config, BaseModel):
        data, source = config.model_dump(mode="json", exclude_unset=True), type(config).__name__
    elif isinstance(config, Mapping):
        data, source = copy.deepcopy(dict(config)), schema.__name__
    elif config is None:
        data, source = {}, schema.__name__
    elif _is_path(config):
        data, source = read_yaml(config), str(config)
    else:
        raise ConfigError(f"{schema.__name__}: expected a config object, dict or YAML path")
    data = apply_overrides(data, _override_list(overrides))
    given = {key.replace("__", "."): value for key, value in fields.items()}
    return apply_overrides(data, _override_list(given)), source


def _config(
    schema: type[ModelT], config: ConfigLike | None, overrides: Overrides = (), **fields: Any
) -> ModelT:
    """`_config_data` validated as a ``schema`` (errors located as the CLI's)."""
    return validate_config(schema, *_config_data(schema, config, overrides, **fields))


def _as_record(item: Record | Mapping[str, Any], index: int) -> Record:
    """``item`` as a `Record`; a dict that is not one is a `DataError` at ``records:INDEX``."""
    if isinstance(item, Record):
        return item
    if isinstance(item, Mapping):
        return parse_record(dict(item), "records", index)
    raise ConfigError(f"records:{index}: expected a Record or a dict, got {type(item).__name__}")


def _records_file(records: RecordsLike, folder: Path) -> Path:
    """``records`` as a file: a path as given, objects written to ``folder`` (named by
    content, so the same records give the same file and an earlier file is never replaced)."""
    if _is_path(records):
        return Path(records)  # type: ignore[arg-type]
    rows = [_as_record(item, i) for i, item in enumerate(records, 1)]  # type: ignore[union-attr]
    lines = "".join(r.model_dump_json() for r in rows).encode()
    path = folder / f"records-{hashlib.sha256(lines).hexdigest()[:12]}.jsonl"
    if not path.is_file():
        write_jsonl(path, rows)
    return path


@contextmanager
def _output_file(out: str | PathLike[str] | None, name: str) -> Iterator[Path]:
    """``out``, or ``name`` in a temporary folder removed afterwards (nothing kept)."""
    if out is not None:
        yield Path(out)
        return
    with tempfile.TemporaryDirectory(prefix="dualview-") as folder:
        yield Path(folder) / name


def read_records(source: str | PathLike[str], format: str = "dualview") -> list[Record]:
    """Every record of ``source`` (a JSONL file, or any format `dualview.data.formats`
    reads: ``promptriever``, ``beir``, ``infir``, ``tevatron``, ``st``, ``parquet``)."""
    from dualview.data import formats

    return list(formats.get_reader(format)(source))


# -- synthesis -----------------------------------------------------------------------------


@dataclass
class SynthesisResult:
    """What a synthesis task produced. ``records``: its output records (for ``reverse``,
    the dual views); ``dropped``: one row per unit that gave no record, with its reason and
    the raw answers; ``stats``: what ``OUT.stats.json`` holds; ``out``: the output file, or
    None when nothing was kept."""

    records: list[Record]
    dropped: list[dict[str, Any]]
    stats: dict[str, Any]
    out: Path | None = None


def _backend(backend: BackendConfig | Mapping[str, Any] | str) -> BackendConfig:
    """The `BackendConfig` that ``backend`` (object, dict or name) stands for."""
    if isinstance(backend, BackendConfig):
        return backend
    if isinstance(backend, Mapping):
        return validate_config(BackendConfig, dict(backend), "backend")
    if backend.startswith("embedded:"):
        return BackendConfig(kind="local", model=backend)
    kinds = BACKENDS.names()
    if backend in kinds:
        return BackendConfig(kind=backend)
    choices = ", ".join([*kinds, STUB_BACKEND, "embedded:NAME"])
    raise ConfigError(f"backend {backend!r}: unknown; choose from {choices}, or give a dict")


@contextmanager
def _served(backend: BackendConfig | Mapping[str, Any] | str | None) -> Iterator[list[str]]:
    """The job overrides that pick ``backend`` (``stub``: a `StubServer` for the call)."""
    if backend != STUB_BACKEND:
        config = None if backend is None else _backend(backend)
        yield [] if config is None else flag_overrides({"backend": config.model_dump()})
        return
    from dualview.synth.testing import StubServer

    with StubServer() as server:
        stub = {"kind": "openai", "model": STUB_BACKEND, "base_url": server.base_url}
        yield flag_overrides({"backend": stub})


def synthesize(
    records: RecordsLike,
    backend: BackendConfig | Mapping[str, Any] | str | None = None,
    *,
    task: str = "reverse",
    job: ConfigLike | None = None,
    overrides: Overrides = (),
    out: str | PathLike[str] | None = None,
    input_format: str = "dualview",
    limit: int | None = None,
) -> SynthesisResult:
    """Run an LLM task over ``records`` (``reverse``: dual-view polarity reversal, as
    ``dualview reverse``; also ``seed``, ``poison``, ``verify``).

    ``backend``: a `BackendConfig` or its dict (``{"kind": "openai", "model": ...,
    "base_url": ...}``), or a name: ``local`` (the embedded Qwen2.5-Coder-0.5B), an
    ``embedded:...`` model, ``openai`` / ``vllm`` (with the job's model and URL), or
    ``stub``: a local stand-in server whose well-formed, meaningless answers test the
    plumbing. None: the job's backend (default ``local``). ``job``: the job config
    (`dualview.synth.jobs`: sampling, runner, task settings) as object, dict or YAML;
    ``overrides`` as ``--set``. ``out``: keep the output file there (with its side files
    and the LLM cache, so a rerun resumes); None: a temporary folder, removed afterwards.
    ``limit``: only the first N records (``--limit``). Wraps `dualview.synth.jobs.run_job`.
    """
    from dualview.synth.jobs import run_job

    if task not in TASKS:
        raise ConfigError(f"task {task!r}: unknown; choose from {', '.join(TASKS)}")
    with _served(backend) as picked, _output_file(out, f"{task}.jsonl") as path:
        config: JobBase = _config(job_model(task), job, [*_override_list(overrides), *picked])
        with tempfile.TemporaryDirectory(prefix="dualview-in-") as folder:
            source = _records_file(records, Path(folder))
            fmt = input_format if _is_path(records) else "dualview"  # objects: written as JSONL
            stats = run_job(task, config, source, path, fmt, limit=limit)
        dropped = [row for _, row in iter_json_lines(side_path(path, "dropped.jsonl"))]
        return SynthesisResult(
            records=list(iter_records(path)),
            dropped=dropped,
            stats=stats.to_json(),
            out=None if out is None else path,
        )


# -- training ------------------------------------------------------------------------------


@dataclass
class TrainedModel:
    """A trained model: ``path`` is its saved folder (sentence-transformers format, with
    its model card), ``output_dir`` the run's folder (checkpoints, ``train_log.jsonl``).
    ``model`` loads it (a ``SentenceTransformer``, or a reranker). Anywhere a model path is
    expected (`evaluate`, `mine`), a `TrainedModel` can be given instead."""

    path: Path | None
    output_dir: Path
    steps: int
    first_loss: float | None
    last_loss: float | None
    interrupted: bool = False
    _loaded: Any = field(default=None, init=False, repr=False)

    def __fspath__(self) -> str:
        """The saved model folder (so a `TrainedModel` is a path)."""
        if self.path is None and self.interrupted:
            raise ConfigError(
                f"{self.output_dir}: training stopped at step {self.steps} with a checkpoint "
                "and no saved model; continue with train(..., resume=True)"
            )
        if self.path is None:
            raise ConfigError(f"{self.output_dir}: no saved model (not the main process)")
        return str(self.path)

    def load(self, device: str | None = None) -> Any:
        """The model, loaded from `path`: a ``SentenceTransformer`` for a bi-encoder, a
        `dualview.models.reranker.Reranker` for a cross-encoder or LLM reranker."""
        from dualview.models.reranker import load_reranker
        from dualview.models.saved import saved_kind
        from dualview.retrieval.encode import load_sentence_transformer

        folder = self.__fspath__()
        if saved_kind(folder).scores_pairs:
            return load_reranker(folder, device)
        return load_sentence_transformer(folder, device=device)

    @property
    def model(self) -> Any:
        """The model, loaded once (`load` on the default device)."""
        if self._loaded is None:
            self._loaded = self.load()
        return self._loaded


def train(
    config: ConfigLike,
    records: RecordsLike | None = None,
    *,
    output_dir: str | PathLike[str] | None = None,
    overrides: Overrides = (),
    resume: bool = False,
    overwrite: bool = False,
    allow_config_change: bool = False,
) -> TrainedModel:
    """Train as ``config`` says (a `TrainConfig`, its dict, or a YAML file such as
    ``configs/train/minilm-cpu.yaml``), as ``dualview train`` does, model card included.

    ``records``: the training records (a file, or Record objects or dicts, which are written
    to ``OUTPUT_DIR/records-<hash>.jsonl``); they replace ``data.train_file``.
    ``output_dir`` replaces the config's; ``overrides`` as ``--set`` (``{"max_steps": 2}``).
    ``resume``, ``overwrite`` and ``allow_config_change`` are the CLI's ``--resume``,
    ``--overwrite-output-dir`` and ``--allow-config-change``. Wraps
    `dualview.train.trainer.train` and `dualview.hub.model_card.write_model_card`.
    """
    from dualview.hub.model_card import write_model_card
    from dualview.train.trainer import train as run_training

    placeholder = None if records is None else "(records)"  # checked before any write
    settings: TrainConfig = _config(
        TrainConfig, config, overrides, output_dir=output_dir, data__train_file=placeholder
    )
    if records is not None:
        Path(settings.output_dir).mkdir(parents=True, exist_ok=True)
        train_file = _records_file(records, Path(settings.output_dir))
        data = settings.data.model_copy(update={"train_file": train_file})
        settings = settings.model_copy(update={"data": data})
    result = run_training(
        settings, resume=resume, allow_config_change=allow_config_change, overwrite=overwrite
    )
    if result.model_dir is not None and not result.interrupted:
        write_model_card(result.model_dir)  # as the CLI: the card of a model saved for a user
    return TrainedModel(
        path=result.model_dir,
        output_dir=Path(settings.output_dir),
        steps=result.steps,
        first_loss=result.first_loss,
        last_loss=result.last_loss,
        interrupted=result.interrupted,
    )


# -- evaluation ----------------------------------------------------------------------------

ModelLike = str | PathLike[str] | TrainedModel


@dataclass
class EvalResults:
    """Results of `evaluate`, per model (column) and benchmark (label).

    ``metrics[model][benchmark][metric]``: the means (IR measures as fractions, p-MRR and
    accuracies as percentages, as in the result files); ``per_query[model][benchmark]
    [metric][query_id]``: each query's value; ``results[model][benchmark]``: the whole
    result (what ``dualview eval`` writes as ``<model>/<benchmark>.json``). ``files``: the
    files written (none without ``out``)."""

    models: list[str]
    benchmarks: list[str]
    results: dict[str, dict[str, dict[str, Any]]]
    files: list[Path]
    out: Path | None
    _summary: Summary = field(repr=False)

    @property
    def metrics(self) -> dict[str, dict[str, dict[str, float]]]:
        """``metrics[model][benchmark][metric]``: the mean over queries."""
        return self._summary.values

    @property
    def per_query(self) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
        """``per_query[model][benchmark][metric][query_id]``: each query's value."""
        return {
            model: {bench: result["per_query"] for bench, result in by_bench.items()}
            for model, by_bench in self.results.items()
        }

    def table(self) -> str:
        """Markdown table, one column per model, IR measures x100 (as ``summary.md``)."""
        return self._summary.table()


def _model_name(model: ModelLike) -> str:
    """The name or path the library takes for ``model``."""
    return model.__fspath__() if isinstance(model, TrainedModel) else str(model)


def _names(items: ModelLike | Sequence[ModelLike] | None) -> list[str]:
    """`_model_name` of one model or of each of a list (None: none)."""
    if items is None:
        return []
    if isinstance(items, str | PathLike):
        return [_model_name(items)]
    return [_model_name(item) for item in items]


def evaluate(
    models: ModelLike | Sequence[ModelLike] | None,
    benchmarks: str | Sequence[str],
    *,
    out: str | PathLike[str] | None = None,
    rerankers: ModelLike | Sequence[ModelLike] | None = None,
    first_stage: str = "model",
    top_k: int = 20,
    interpolate: float | Sequence[float] = 1.0,
    reranker_precision: str = "auto",
    settings: EvalSettings | Mapping[str, Any] | None = None,
    device: str | None = None,
    precision: str = "auto",
    devices: Sequence[str] | None = None,
    cache: bool = True,
    limit: int | None = None,
    skip: int = 0,
) -> EvalResults:
    """Evaluate ``models`` (a `TrainedModel`, a folder, a Hub name, ``embedded:minilm``, or
    a list) on ``benchmarks`` (specs ``KIND[:SUBSETS][=PATH]`` as ``dualview eval -b``).

    Returns the results (`EvalResults`) and writes nothing, unless ``out`` names a folder:
    then the files ``dualview eval --out`` writes, and matching results there are reused.
    (The embedding cache is kept as always; ``cache=False`` leaves it alone.)
    ``rerankers``, ``first_stage``, ``top_k``, ``interpolate``: two-stage evaluation as
    ``--reranker``, ``--first-stage``, ``--top-k``, ``--interpolate`` (the reranker's share
    of the interpolated score, one column per weight; 1: the reranker alone).
    ``reranker_precision``: the reranker folders' weights, as ``--reranker-precision``
    (``auto``: bf16 on CUDA, fp32 on CPU; ``bf16`` speeds an LLM reranker up on a CPU with
    bf16 instructions).
    ``settings``: `EvalSettings` or its dict (query template, prompts, search backend,
    batch size). ``limit``: only the first N queries
    (pairs) of each set (``--limit``); ``skip``: leave out the first N before that
    (``--skip``). Wraps `dualview.eval.run.evaluate`.
    """
    from dualview.eval.run import EvalSettings
    from dualview.eval.run import evaluate as run_evaluation
    from dualview.eval.two_stage import RerankSettings

    if isinstance(settings, Mapping):
        known = [f.name for f in fields(EvalSettings)]
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise ConfigError(f"settings: unknown {unknown}; fields: {', '.join(known)}")
        settings = EvalSettings(**settings)
    settings = settings or EvalSettings()
    if limit is not None:
        settings = replace(settings, limit=limit)
    if skip:
        settings = replace(settings, skip=skip)
    try:
        check_query_template(settings.query_template)
    except ValueError as exc:
        raise ConfigError(f"query_template: {exc}") from None
    specs = [benchmarks] if isinstance(benchmarks, str) else list(benchmarks)
    weights = [interpolate] if isinstance(interpolate, int | float) else list(interpolate)
    rerank = RerankSettings(
        rerankers=_names(rerankers),
        first_stage=first_stage,
        top_k=top_k,
        weights=[float(w) for w in weights],
        precision=reranker_precision,
    )
    summary = run_evaluation(
        _names(models),
        specs,
        None if out is None else Path(out),
        settings=settings,
        device=device,
        cache=cache,
        precision=precision,
        devices=list(devices) if devices else None,
        rerank=rerank,
    )
    return EvalResults(
        models=summary.models,
        benchmarks=summary.benchmarks,
        results=summary.results,
        files=summary.files,
        out=None if out is None else Path(out),
        _summary=summary,
    )


# -- mining --------------------------------------------------------------------------------


@dataclass
class MiningResult:
    """Records with mined hard negatives; ``stats`` and ``manifest`` as ``dualview mine``
    prints and writes; ``out`` the output file, or None when nothing was kept."""

    records: list[Record]
    stats: dict[str, Any]
    manifest: dict[str, Any]
    out: Path | None = None


def mine(
    records: RecordsLike,
    *,
    model: ModelLike | None = None,
    corpus: str | PathLike[str] | None = None,
    config: ConfigLike | None = None,
    overrides: Overrides = (),
    out: str | PathLike[str] | None = None,
    limit: int | None = None,
) -> MiningResult:
    """Mine hard negatives for ``records`` with false-negative protection, as
    ``dualview mine``: ``model`` searches ``corpus`` (a BEIR folder or ``corpus.jsonl``;
    default: the records' own documents). ``config``: `MineConfig` (object, dict or YAML;
    e.g. ``num_negatives``, ``rank_start``, ``select``), ``overrides`` as ``--set``.
    ``out``: keep the output file (and its manifest) there; None: nothing kept. ``limit``:
    only the first N records (``--limit``). Wraps `dualview.retrieval.mine.mine_file`.
    """
    from dualview.retrieval.mine import mine_file

    name = None if model is None else _model_name(model)
    settings: MineConfig = _config(MineConfig, config, overrides, model=name)
    with (
        _output_file(out, "mined.jsonl") as path,
        tempfile.TemporaryDirectory(prefix="dualview-in-") as folder,
    ):
        source = _records_file(records, Path(folder))
        result = mine_file(source, path, settings, corpus=corpus, limit=limit)
        mined = list(iter_records(path))
    return MiningResult(mined, result.stats, result.manifest, None if out is None else path)


# -- experiments and reports ---------------------------------------------------------------


@dataclass
class ExperimentRun:
    """A run of `run_experiment`: its folder, each stage's folder by name (``data``,
    ``synth``, ``mix-<name>``, ``train-<name>``, ``eval``, ``report``; for a sweep, each
    arm's run folder), and the report folder (None on a dry run)."""

    run_dir: Path
    stages: dict[str, Path]
    report: Path | None

    def __fspath__(self) -> str:
        """The run folder (so an `ExperimentRun` is a path)."""
        return str(self.run_dir)


def _experiment(experiment: ConfigLike, overrides: Overrides) -> Experiment:
    """``experiment`` (object, dict or YAML file) as an `Experiment` with ``overrides``."""
    from dualview.pipeline.experiment import Experiment, load_experiment

    if _is_path(experiment):  # as `dualview run`: errors name the file
        return load_experiment(experiment, _override_list(overrides))  # type: ignore[arg-type]
    if isinstance(experiment, Experiment) and not overrides:
        return experiment
    return _config(Experiment, experiment, overrides).located("experiment")


def run_experiment(
    experiment: ConfigLike,
    *,
    overrides: Overrides = (),
    dry_run: bool = False,
    reuse_from: Sequence[str | PathLike[str]] = (),
    allow_config_change: bool = False,
    quiet: bool = False,
) -> ExperimentRun:
    """Run an experiment (an `Experiment`, its dict, or a YAML file) as ``dualview run``:
    every stage cached by its inputs and resumable, then the report. A YAML file with a
    ``sweep:`` block runs every arm and seed, then the sweep's report. ``dry_run``: print
    the plan only. ``quiet``: print nothing. Wraps `dualview.pipeline.runner.run_experiment`
    and `dualview.pipeline.sweep.run_sweep`.
    """
    from dualview.pipeline.build import build_pipeline
    from dualview.pipeline.runner import run_experiment as run_pipeline
    from dualview.pipeline.sweep import load_sweep, run_sweep

    console = Console(stderr=True, quiet=quiet)
    build = partial(build_pipeline, allow_config_change=allow_config_change)
    sweep = load_sweep(experiment, _override_list(overrides)) if _is_path(experiment) else None
    if sweep is not None:
        if reuse_from:
            raise ConfigError("reuse_from: not with a sweep (its arms reuse each other)")
        runs = run_sweep(sweep, console, dry_run=dry_run, build=build)
        done = None if dry_run else report(sweep.sweep_dir).markdown.parent
        return ExperimentRun(sweep.sweep_dir, {name: Path(name) for name in runs}, done)
    exp = _experiment(experiment, overrides)
    outputs = run_pipeline(
        exp, console, dry_run=dry_run, reuse_from=[Path(p) for p in reuse_from], build=build
    )
    folder = None if dry_run else outputs.get("report")
    return ExperimentRun(exp.resolved_run_dir(), dict(outputs), folder)


def _pairs(pairs: Sequence[str | tuple[str, str]] | None) -> list[tuple[str, str]] | None:
    """``"ARM:CONTROL"`` strings or tuples as pairs (None stays None: the defaults)."""
    if pairs is None:
        return None
    return [parse_pair(p) if isinstance(p, str) else (p[0], p[1]) for p in pairs]


def _report_folder(item: str | PathLike[str] | ExperimentRun | EvalResults) -> Path:
    """The folder a report reads for ``item``; in-memory results have none."""
    if isinstance(item, EvalResults):
        if item.out is None:
            raise ConfigError("report: evaluate(..., out=FOLDER) first; a report reads files")
        return item.out
    return Path(item)


def report(
    runs: str
    | PathLike[str]
    | ExperimentRun
    | EvalResults
    | Sequence[str | PathLike[str] | ExperimentRun | EvalResults],
    *,
    out: str | PathLike[str] | None = None,
    compare: Sequence[str | tuple[str, str]] | None = None,
    flips: Sequence[str | tuple[str, str]] | None = None,
    metrics: str | Sequence[str] | None = None,
    resamples: int = 10_000,
    review: Sequence[str | PathLike[str]] | None = None,
) -> ReportFiles:
    """Write the report of one run, several runs (seeds: mean +- sd), or one sweep folder,
    as ``dualview report``: tables (Markdown, CSV), figures, paired significance and error
    analysis; returns the files written (``report.markdown`` is the Markdown table).

    ``runs``: run folders, `ExperimentRun` s, or `EvalResults` written with ``out``.
    ``out``: default ``RUN_DIR/report``. ``compare`` / ``flips``: ``"ARM:CONTROL"`` pairs
    (``[]``: none; None: the defaults). ``metrics``: metric name prefixes to keep.
    ``review``: verdict files of ``dualview review`` to summarize. Wraps
    `dualview.report.run_report.report_runs` and `dualview.report.sweep_report.report_sweep`.
    """
    from dualview.report.run_report import report_runs
    from dualview.report.sweep_report import report_sweep
    from dualview.review.stats import report_sections
    from dualview.run_folder import is_sweep_dir

    items = [runs] if isinstance(runs, str | PathLike | EvalResults) else list(runs)
    folders = [_report_folder(item) for item in items]
    verdicts = None if review is None else [Path(p) for p in review]
    options = ReportOptions(
        comparisons=_pairs(compare),
        error_pairs=_pairs(flips),
        n_resamples=resamples,
        sections=report_sections(verdicts, folders),
        metrics=parse_prefixes(metrics) if isinstance(metrics, str) else tuple(metrics or ()),
        read=list(verdicts or []),
    )
    target = None if out is None else Path(out)
    if len(folders) == 1 and is_sweep_dir(folders[0]):
        return report_sweep(folders[0], target, options)
    return report_runs(folders, target, options)
