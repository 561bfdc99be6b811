"""Evaluate models on benchmarks: one JSON per (model, benchmark), a summary table.

`evaluate` is the library entry point behind ``dualview eval``::

    from dualview.eval.run import evaluate
    summary = evaluate(["embedded:minilm"], ["beir=../shared/data/msmarco-1743"], "out/eval")
    print(summary.table())

Output, under ``out_dir``:

- ``<model>/<benchmark>.json``: metrics, per-query values, counts, the model fingerprint and
  name, the data fingerprint and files, the settings, library versions, start time, seconds;
- ``summary.json`` and ``summary.md``: every metric of every benchmark, one column per model;
- ``mteb/<model>/no_revision_available/<Task>.json``: mteb's result format for benchmarks mteb
  also has (`dualview.eval.mteb_compat`).

A result file whose model fingerprint, data fingerprint, settings and two-stage record
match the current call is reused instead of recomputed, so an interrupted multi-model run
resumes where it stopped.

Two-stage evaluation (``rerank=RerankSettings(...)``, `dualview.eval.two_stage`): each
reranker over each first stage is one more column, ``<reranker>@<first stage>``::

    evaluate(["embedded:minilm"], ["paired=data/gold-test"], "out/eval",
             rerank=RerankSettings(rerankers=["out/ce"], first_stage="model", top_k=20))

A reranked column's result also holds its first stage alone, ``first_stage`` (metrics,
per-query values; computed once per benchmark for every reranker over it), and the summary
shows them as rows ``<metric> (first stage)`` in that column: the reranker's gain in one
table. Each result says which mteb tasks it maps to and what was skipped, why (``mteb``).
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from dualview.eval.benchmarks import data_path, load_benchmark, spec_label
from dualview.eval.benchmarks.base import Benchmark, BenchmarkResult
from dualview.eval.layout import check_result_folders, display_value, model_slug
from dualview.eval.mteb_compat import mteb_mapping, write_mteb_results
from dualview.eval.two_stage import (
    Ranker,
    RerankSettings,
    open_reranker,
    reranker_name,
)
from dualview.io.atomic import AtomicJsonlWriter, atomic_write_text
from dualview.io.paths import check_outputs
from dualview.retrieval.encode import Encoder

PACKAGES = ("dualview", "torch", "transformers", "sentence-transformers", "pytrec-eval-terrier")


@dataclass
class EvalSettings:
    """Everything besides model and data that changes the numbers (stored in each result)."""

    query_template: str = "{query} {instruction}"
    force_template: bool = False
    query_prompt: str | None = None
    doc_prompt: str | None = None
    backend: str = "auto"
    batch_size: int = 32
    #: only the first N queries (pairs, for paired sets) of each benchmark set: a quick try
    limit: int | None = None
    #: leave out the first N queries (pairs) of each set, before ``limit``: a validation
    #: slice disjoint from a reported ``limit`` run
    skip: int = 0

    def record(self) -> dict[str, Any]:
        """What a result stores (and reuse compares): ``limit`` and ``skip`` only when set, so
        results written before they existed are still reused."""
        settings = asdict(self)
        if settings["limit"] is None:
            del settings["limit"]
        if not settings["skip"]:
            del settings["skip"]
        return settings


#: The suffix of a summary row that holds reranked columns' first stage alone.
FIRST_STAGE_ROW = " (first stage)"


@dataclass
class Summary:
    """Metrics per model and benchmark: ``values[model][benchmark][metric]``."""

    models: list[str]
    benchmarks: list[str]
    values: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    #: ``results[model][benchmark]``: the whole result (what ``<model>/<benchmark>.json``
    #: holds: metrics, per-query values, counts, model and data fingerprints, settings).
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: ``first_stage[model][benchmark][metric]``: a reranked column's first stage alone
    #: (`FirstStageAlone`), shown as rows ``<metric> (first stage)`` under its own metrics.
    first_stage: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    @classmethod
    def merged(cls, parts: list[Summary]) -> Summary:
        """One summary of the columns of several `evaluate` calls on the same benchmarks
        (first-stage models, then rerankers over a first stage), in the calls' order."""
        whole = cls(models=[], benchmarks=parts[-1].benchmarks if parts else [])
        for part in parts:
            whole.models += part.models
            whole.values.update(part.values)
            whole.results.update(part.results)
            whole.first_stage.update(part.first_stage)  # reranked columns' first stage alone
            whole.files += part.files
        return whole

    def rows(self) -> list[tuple[str, str, list[float | None]]]:
        """``(benchmark, metric, [value per model])``, metrics in first-seen order; then,
        when a column is reranked, its first stage's as ``<metric> (first stage)``."""
        out = []
        for bench in self.benchmarks:
            for source, suffix in ((self.values, ""), (self.first_stage, FIRST_STAGE_ROW)):
                metrics: dict[str, None] = {}
                for model in self.models:
                    metrics.update(dict.fromkeys(source.get(model, {}).get(bench, {})))
                for metric in metrics:
                    cells = [source.get(m, {}).get(bench, {}).get(metric) for m in self.models]
                    out.append((bench, metric + suffix, cells))
        return out

    def table(self) -> str:
        """Markdown table, one column per model."""
        head = "| benchmark | metric | " + " | ".join(self.models) + " |"
        sep = "|---|---|" + "---:|" * len(self.models)
        lines = [head, sep]
        for bench, metric, cells in self.rows():
            shown = ["-" if v is None else f"{display_value(metric, v):.2f}" for v in cells]
            lines.append(f"| {bench} | {metric} | " + " | ".join(shown) + " |")
        return "\n".join(lines)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _reusable(
    path: Path,
    model_fp: str,
    data_fp: str,
    settings: dict[str, Any],
    rerank: dict[str, Any] | None = None,
) -> dict | None:
    if not path.is_file():
        return None
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, OSError):
        return None
    same = (
        old.get("model", {}).get("fingerprint") == model_fp
        and old.get("benchmark", {}).get("data_fingerprint") == data_fp
        and old.get("settings") == settings
        and old.get("rerank") == rerank
    )
    return old if same else None


def _measure(
    ranker: Ranker, bench: Benchmark, settings: EvalSettings
) -> tuple[BenchmarkResult, str, float]:
    """``ranker`` on ``bench``: the result, its start time (UTC, ISO) and seconds."""
    ctx = ranker.context(
        query_template=settings.query_template,
        force_template=settings.force_template,
        query_prompt=settings.query_prompt,
        doc_prompt=settings.doc_prompt,
        backend=settings.backend,
        limit=settings.limit,
        skip=settings.skip,
    )
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    result = bench.evaluate(ctx)
    return result, started, round(time.perf_counter() - t0, 3)


@dataclass
class FirstStageAlone:
    """The first stage of reranked columns evaluated alone, once per benchmark and shared by
    every reranker over it: the result JSON's ``first_stage`` entry (name, kind,
    fingerprint, metrics, per-query values, counts, seconds), so the reranker's gain is read
    from one result and one table (`Summary.first_stage`)."""

    settings: EvalSettings
    done: dict[str, dict[str, Any]] = field(default_factory=dict)

    @staticmethod
    def applies(ranker: Ranker) -> bool:
        """A reranked column over a first stage that ranks by itself (not ``candidates``)."""
        return ranker.reranker is not None and ranker.first_stage != "candidates"

    def entry(self, ranker: Ranker, bench: Benchmark, label: str) -> dict[str, Any]:
        if label not in self.done:
            alone = Ranker(
                ranker.first_stage, ranker.first_name, ranker.encoder, top_k=ranker.top_k
            )
            result, _, seconds = _measure(alone, bench, self.settings)
            self.done[label] = {
                "name": alone.name,
                "kind": alone.first_stage,
                "fingerprint": alone.fingerprint(bench),
                "metrics": result.metrics,
                "counts": result.counts,
                "per_query": result.per_query,
                "seconds": seconds,
            }
        return self.done[label]


def run_one(
    ranker: Ranker,
    spec: str,
    bench: Benchmark,
    settings: EvalSettings,
    out_path: Path | None,
    first_stage: FirstStageAlone | None = None,
) -> dict[str, Any]:
    """Evaluate one ranker (a model, or a reranker over a first stage) on one benchmark and
    write its JSON (or reuse a matching one); with ``out_path`` None, only return it.

    A reranked column's result also holds its first stage alone (``first_stage``, from
    ``first_stage``); an older result without it is recomputed. The mteb result files are
    (re)written for a reused result too, and what has none is said (`write_mteb_results`).
    """
    data_fp = bench.fingerprint()
    settings_dict = settings.record()
    record = ranker.record(bench)
    if first_stage is not None and not FirstStageAlone.applies(ranker):
        first_stage = None
    if out_path is not None:
        old = _reusable(out_path, ranker.fingerprint(bench), data_fp, settings_dict, record)
        if old is not None and (first_stage is None or "first_stage" in old):
            write_mteb_results(old, out_path.parent.parent)
            return old
    result, started, seconds = _measure(ranker, bench, settings)
    payload: dict[str, Any] = {
        "benchmark": {
            "spec": spec,
            "label": spec_label(spec),
            **bench.meta.record(),
            "data_fingerprint": data_fp,
            "files": [str(f) for f in bench.files],
        },
        "model": ranker.model_info(bench),
        "settings": settings_dict,
    }
    if record is not None:
        payload["rerank"] = record
    payload |= {
        "metrics": result.metrics,
        "counts": result.counts,
        "per_query": result.per_query,
        "versions": versions(),
        "started_at": started,
        "seconds": seconds,
    }
    if first_stage is not None:
        payload["first_stage"] = first_stage.entry(ranker, bench, spec_label(spec))
    payload["mteb"] = mteb_mapping(payload).summary()
    if out_path is None:
        return payload
    with AtomicJsonlWriter(out_path) as writer:
        writer.write(payload)
    write_mteb_results(payload, out_path.parent.parent)  # OUT/mteb/<model>/... when mapped
    return payload


def evaluate(
    models: list[str],
    benchmarks: list[str],
    out_dir: str | Path | None,
    settings: EvalSettings | None = None,
    device: str | None = None,
    cache: bool = True,
    precision: str = "auto",
    devices: list[str] | None = None,
    rerank: RerankSettings | None = None,
) -> Summary:
    """Evaluate every model on every benchmark spec (``KIND[:SUBSETS][=PATH]``).

    Benchmarks (and reranker folders) are checked before any model runs, so a bad path
    fails fast; so are two models that would share a result folder and an ``out_dir`` that
    is (or lies inside) a model, reranker or benchmark folder. ``precision`` and
    ``devices`` go to the `Encoder` (``"fp32"`` forces full precision; the precision is part
    of the model fingerprint, so results are only reused for the same one). ``rerank``:
    rerankers over a first stage (`RerankSettings`); each reranker over each first stage is a
    column ``<reranker>@<first stage>``, and with no reranker the first stage alone
    (``models``, or ``bm25``) is evaluated. With ``out_dir`` None nothing is written (nor
    reused): the results are only returned (`Summary.results`).
    """
    settings = settings or EvalSettings()
    rerank = rerank or RerankSettings()
    rerank.check(list(models))
    out_dir = None if out_dir is None else Path(out_dir)
    check_result_folders(rerank.columns(list(models)), out_dir or Path("."))
    loaded = [(spec, spec_label(spec), load_benchmark(spec)) for spec in benchmarks]
    folders = [item for item in rerank.rerankers if isinstance(item, str)]
    read = [*models, *folders, *(data_path(spec) for spec in benchmarks)]
    if out_dir is not None:
        check_outputs([out_dir], read, replaced=False)  # results go beside the inputs, not in
    summary = Summary(models=[], benchmarks=[label for _, label, _ in loaded])
    for first in rerank.first_stages(list(models)):
        encoder = None
        if rerank.first_stage == "model":
            encoder = Encoder(
                first,
                batch_size=settings.batch_size,
                device=device,
                cache=cache,
                precision=precision,
                devices=devices,
            )
        alone = FirstStageAlone(settings)
        for item in rerank.rerankers or [None]:
            second = None
            if item is not None:  # loaded once, shared by its interpolation weights
                second = open_reranker(item, device, settings.batch_size, cache, rerank.precision)
            for weight in rerank.weights if item is not None else [1.0]:
                ranker = Ranker(rerank.first_stage, first, encoder, top_k=rerank.top_k)
                if second is not None:
                    ranker.reranker, ranker.reranker_name = second, reranker_name(item)
                    ranker.weight = weight
                _run_column(ranker, loaded, settings, out_dir, alone, summary)
            if second is not None:
                second.close()
        if encoder is not None:
            encoder.close()
    if out_dir is not None:
        write_summary(summary, out_dir)
    return summary


def _run_column(
    ranker: Ranker,
    loaded: list[tuple[str, str, Benchmark]],
    settings: EvalSettings,
    out_dir: Path | None,
    alone: FirstStageAlone,
    summary: Summary,
) -> None:
    """Evaluate one column on every benchmark and add it to ``summary``."""
    summary.models.append(ranker.name)
    for spec, label, bench in loaded:
        path = _result_path(out_dir, ranker.name, label)
        payload = run_one(ranker, spec, bench, settings, path, alone)
        summary.values.setdefault(ranker.name, {})[label] = payload["metrics"]
        if "first_stage" in payload:
            first_metrics = payload["first_stage"]["metrics"]
            summary.first_stage.setdefault(ranker.name, {})[label] = first_metrics
        summary.results.setdefault(ranker.name, {})[label] = payload
        if path is not None:
            summary.files.append(path)


def _result_path(out_dir: Path | None, model: str, label: str) -> Path | None:
    """``OUT/<model>/<benchmark>.json``, or None when nothing is written."""
    return None if out_dir is None else out_dir / model_slug(model) / f"{label}.json"


def write_summary(summary: Summary, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with AtomicJsonlWriter(out_dir / "summary.json") as writer:
        writer.write(
            {
                "models": summary.models,
                "benchmarks": summary.benchmarks,
                "values": summary.values,
                "first_stage": summary.first_stage,
            }
        )
    atomic_write_text(out_dir / "summary.md", summary.table() + "\n")
