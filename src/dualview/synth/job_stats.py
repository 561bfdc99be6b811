"""An LLM job's ``OUT.stats.json`` (`dualview.synth.runner`) as a typed model, and its
Markdown summary: what came in, what came out, why units were dropped, and what it cost in
calls, tokens and time.

`JobStats` is what the runner returns and writes, what ``dualview synth-merge`` reads and
combines, what ``bench-synth`` and the CLI read. A file is an LLM job's stats when it
validates as one (`is_job_stats`): only the fields every writer has always written are
required, the others are optional, so files written before a field existed (``rejections``,
``first_error``, ``task_fingerprint``, ``endpoints``) and merged shards' stats (no
per-run fields, ``shards`` and ``latency_s_by_shard`` instead) load. `JobStats.to_json`
writes back exactly the fields a file holds (unknown ones too), in the runner's order.

``docs/results.md`` renders committed stats files with it (`dualview.docgen.results_doc`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dualview.errors import DataError
from dualview.io.files import read_json_file


class Outcomes(BaseModel):
    """Units per outcome status (`dualview.synth.task.STATUSES`, in that order)."""

    model_config = ConfigDict(extra="forbid")

    ok: int = 0
    impossible: int = 0
    rejected: int = 0
    skipped: int = 0
    error: int = 0

    def items(self) -> Iterator[tuple[str, int]]:
        """``(status, units)`` of the statuses the file holds."""
        return iter(self.model_dump(exclude_unset=True).items())

    def answered(self) -> int:
        """Units the LLM answered: every status but ``error`` and ``skipped``."""
        return self.ok + self.impossible + self.rejected


class Latency(BaseModel):
    """Seconds per LLM call (None: no call)."""

    model_config = ConfigDict(extra="allow")

    p50: float | None = None
    p95: float | None = None
    mean: float | None = None


class JobStats(BaseModel):
    """One run's stats (or merged shards'); see the module docstring for optional fields."""

    model_config = ConfigDict(extra="allow")

    units: int
    complete: bool = True
    outcomes: Outcomes
    records_out: int
    dropped: int | None = None
    # rejected units by reason code; None: written before the field
    rejections: dict[str, int] | None = None
    llm_calls: int
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: Latency = Latency()
    cost_usd: float | None = None
    counts: dict[str, int] = {}
    summary: dict[str, Any] = {}
    first_error: str | None = None
    task: str
    model: str | None = None
    input: str = ""
    input_units: int | None = None
    input_digest: str | None = None
    job_fingerprint: str | None = None
    task_fingerprint: dict[str, Any] | None = None
    sampling: dict[str, Any] | None = None
    shard: tuple[int, int] | None = None
    range: tuple[int, int] | None = None
    wall_s: float | None = None
    this_run_units: int | None = None
    endpoints: list[dict[str, Any]] | None = None
    # merged shards (`dualview.synth.merge`)
    shards: int | None = None
    latency_s_by_shard: list[Latency] | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the file: the fields it was made or loaded with."""
        return self.model_dump(mode="json", exclude_unset=True)

    def missing(self, names: tuple[str, ...]) -> list[str]:
        """Those of ``names`` the file does not hold."""
        return [name for name in names if name not in self.model_fields_set]


def parse_job_stats(data: object) -> JobStats | None:
    """``data`` as an LLM job's stats, or None when it is not one."""
    try:
        return JobStats.model_validate(data)
    except ValidationError:
        return None


def is_job_stats(data: object) -> bool:
    return parse_job_stats(data) is not None


def read_job_stats(path: Path) -> JobStats:
    """The stats file ``path``; a located `DataError` when it is not an LLM job's stats."""
    data = read_json_file(path)
    try:
        return JobStats.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(part) for part in err["loc"]) or "json"
        raise DataError(path, None, field, f"{err['msg']}: not the stats of a synth run") from None


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _rejecter(task: str) -> str:
    """Who rejects a unit: in verify the judge (a scenario whose intended passage did not
    win, or an answer it could not parse; ``rejections`` counts them per view), else the
    parser of the LLM's answer."""
    return "judge (or its answer unparsable)" if task == "verify" else "parser"


def stats_markdown(stats: JobStats | dict[str, Any]) -> str:
    """One table, a measure per row (``rejections`` appears in stats written since it
    existed; older files say so)."""
    if not isinstance(stats, JobStats):
        stats = JobStats.model_validate(stats)
    outcomes = stats.outcomes
    if stats.rejections is None:
        why = "not recorded (stats written before the field)"
    else:
        why = ", ".join(f"{code or 'unknown'} {n}" for code, n in stats.rejections.items()) or "-"
    p50, p95 = _seconds(stats.latency_s.p50), _seconds(stats.latency_s.p95)
    rows = [
        ("task", f"`{stats.task}`"),
        ("model", f"`{stats.model or 'n/a'}`"),
        ("units in", str(stats.units)),
        ("accepted (ok)", str(outcomes.ok)),
        ("impossible (the LLM said so)", str(outcomes.impossible)),
        (f"rejected by the {_rejecter(stats.task)}", str(outcomes.rejected)),
        ("rejections by reason", why),
        ("errors", str(outcomes.error)),
        ("records out", str(stats.records_out)),
        ("LLM calls", str(stats.llm_calls)),
        ("prompt / completion tokens", f"{stats.tokens_in} / {stats.tokens_out}"),
        ("latency per call, p50 / p95 (s)", f"{p50} / {p95}"),
    ]  # fmt: skip
    lines = ["| measure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"
