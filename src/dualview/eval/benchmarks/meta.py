"""What a benchmark declares about itself (mteb's ``TaskMetadata``, in small): description,
headline metrics and how the report shows them, how its queries pair up, and its mteb tasks.

`dualview.report` and `dualview.eval.mteb_compat` only read this: a new benchmark (one
module, one ``BENCHMARKS.register``) gets its report columns and mteb result files from the
metadata it declares, with no edit elsewhere.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from dualview.config import StrictModel
from dualview.eval.layout import display_value

#: How a metric is stored: ``fraction`` (IR measures, 0..1; shown x100, mteb's value as is)
#: or ``percent`` (p-MRR, pairwise accuracy: stored x100, shown as stored, /100 for mteb).
Scale = Literal["fraction", "percent"]
#: dualview IR measure -> mteb's score key
MTEB_SCORE_KEYS = {
    "MAP@1000": "map_at_1000",
    "nDCG@5": "ndcg_at_5",
    "nDCG@10": "ndcg_at_10",
    "Recall@100": "recall_at_100",
    "MRR@10": "mrr_at_10",
    "Robustness@10": "robustness_at_10",
}
#: the part before ``/`` of a per-part metric (``Robust04/p-MRR``), in a column pattern
PART = "*/"


class _Frozen(StrictModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)


class ReportColumn(_Frozen):
    """A headline metric as a report column.

    ``metric``: the result's metric name, or ``*/NAME``: one column per part's ``<part>/NAME``
    (InfoSearch dimensions, MAIR tasks), in the result's order. ``column``: the column's
    name, with ``{label}`` (the spec's label), ``{part}`` and ``{metric}`` (the metric's full
    name). ``scale``: how the value is stored (`Scale`).
    """

    metric: str
    column: str = "{label} {metric}"
    scale: Scale = "fraction"

    def sources(self, label: str, metrics: dict[str, float]) -> dict[str, str]:
        """Column name -> the metric behind it, for the metrics of one result."""
        if not self.metric.startswith(PART):
            if self.metric not in metrics:
                return {}
            return {self.column.format(label=label, part="", metric=self.metric): self.metric}
        out = {}
        for name in metrics:
            part, _, metric = name.partition("/")
            if metric == self.metric[len(PART) :]:
                out[self.column.format(label=label, part=part, metric=name)] = name
        return out

    def shown(self, value: float) -> float:
        """The value as the report shows it (x100)."""
        return 100.0 * value if self.scale == "fraction" else value

    def fraction(self, value: float) -> float:
        """The value as a fraction (mteb's scale)."""
        return value / 100.0 if self.scale == "percent" else value


class MtebTasks(_Frozen):
    """How a result becomes mteb task results (`dualview.eval.mteb_compat`).

    ``skip``: why the benchmark has no mteb task (then nothing else is read). Otherwise the
    result is cut into subsets by ``subsets``: ``whole`` (one task, ``tasks[""]``), ``parts``
    (each part ``<part>/<main_score>`` of the result: FollowIR's sets), ``hub_dataset`` (the
    spec's subset names a Hub dataset, ``beir:BeIR/scifact`` -> ``scifact``; a local folder is
    skipped for ``local``). ``tasks``: subset -> mteb task; a subset missing there is skipped
    for ``no_task[subset]``, else ``unknown``. ``main_score``: the dualview metric that is
    mteb's main score, named ``main_score_key`` there. The subset's other metrics go in by
    ``score_keys`` (``subset_score_keys[subset]`` first), nested under ``others_under`` when
    set (FollowIR's original-instruction run, ``og``). ``what``: how a skipped subset is named.
    """

    skip: str | None = None
    subsets: Literal["whole", "parts", "hub_dataset"] = "whole"
    tasks: dict[str, str] = Field(default_factory=dict)
    no_task: dict[str, str] = Field(default_factory=dict)
    unknown: str = "no mteb task on this dataset"
    local: str = "a local folder, whose data need not be mteb's"
    main_score: str = ""
    main_score_key: str = ""
    score_keys: dict[str, str] = Field(default_factory=lambda: dict(MTEB_SCORE_KEYS))
    subset_score_keys: dict[str, dict[str, str]] = Field(default_factory=dict)
    others_under: str | None = None
    what: str = "{kind} {subset}"

    @model_validator(mode="after")
    def _skip_or_main_score(self) -> MtebTasks:
        if (self.skip is None) == (not self.main_score or not self.main_score_key):
            raise ValueError("give either skip or main_score and main_score_key")
        return self

    def keys(self, subset: str) -> dict[str, str]:
        """dualview metric -> mteb score key for ``subset``."""
        return {**self.score_keys, **self.subset_score_keys.get(subset, {})}


NO_MTEB = MtebTasks(skip="no mteb task is mapped for this benchmark")
#: ``queries``: per-query values, so arms are compared query by query (paired tests);
#: ``instruction_pairs``: also each query is one side of an instruction pair in dualview's
#: paired layout, whose data files feed the error analysis (`dualview.report.flips`);
#: ``none``: no per-query values.
Pairing = Literal["none", "queries", "instruction_pairs"]
#: What choices may be made on a benchmark (`dualview.eval.selection`): ``validation`` (made
#: to choose on: the gold train data's validation split), ``held_out`` (reported, never
#: selected on: the phenomenon set) or ``any`` (decided by its data: never the gold test split).
Role = Literal["any", "validation", "held_out"]


class BenchmarkMeta(_Frozen):
    """Description of a benchmark, what the report shows of it and its mteb mapping.

    ``columns``: the headline metrics in report order (`ReportColumn`); empty: every metric
    of a result is a column ``<label> <metric>``. ``main_score`` is one of them (or the mean
    behind a ``*/`` column).
    """

    name: str
    description: str
    reference: str
    main_score: str
    hub_dataset: str | None = None
    columns: tuple[ReportColumn, ...] = ()
    pairing: Pairing = "queries"
    mteb: MtebTasks = NO_MTEB
    role: Role = "any"

    @model_validator(mode="after")
    def _main_score_is_headline(self) -> BenchmarkMeta:
        names = {c.metric.removeprefix(PART) for c in self.columns}
        if self.columns and self.main_score not in names:
            raise ValueError(f"main_score {self.main_score!r} is not one of the columns")
        return self

    def scale(self, metric: str) -> Scale:
        """How ``metric`` (or a part's, by a ``*/`` column) is stored: as its column says,
        else by its name (`scale_of`)."""
        for column in self.columns:
            if column.metric.removeprefix(PART) == metric:
                return column.scale
        return scale_of(metric)

    def record(self) -> dict[str, str | None]:
        """What a result JSON stores of the benchmark (its ``benchmark`` entry)."""
        return self.model_dump(
            include={"name", "description", "reference", "main_score", "hub_dataset"}
        )


def report_columns(
    meta: BenchmarkMeta | None, label: str, metrics: dict[str, float]
) -> dict[str, ReportColumn]:
    """Report column -> its `ReportColumn` (naming the metric behind it) for one result of
    a benchmark with metadata ``meta``; of one without (None) or declaring no columns, every
    metric, its scale told by its name (`dualview.eval.layout.display_value`)."""
    specs = meta.columns if meta is not None and meta.columns else _every_metric(metrics)
    out: dict[str, ReportColumn] = {}
    for spec in specs:
        for column, name in spec.sources(label, metrics).items():
            out[column] = spec.model_copy(update={"metric": name})
    return out


def _every_metric(metrics: dict[str, float]) -> tuple[ReportColumn, ...]:
    return tuple(ReportColumn(metric=name, scale=scale_of(name)) for name in metrics)


def scale_of(metric: str) -> Scale:
    """The scale of a metric known by its name only (`display_value`'s rule)."""
    return "fraction" if display_value(metric, 1.0) != 1.0 else "percent"
