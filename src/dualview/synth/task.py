"""What a synthesis task is to the runner: units in, one `Outcome` per unit out.

A *unit* is the input the task handles in one go: usually one record; for ``verify`` a record
with the records that directly follow it and belong to it (its dual view, its InF-IR tuple).
A task asks the LLM through `LLM`, which applies the sampling settings and rate limits
and adds up tokens and latency, so tasks never deal with cost or retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from dualview.data.schema import Record
from dualview.synth.backends.base import (
    AnswerScorer,
    ChatBackend,
    SamplingParams,
    scoring_unsupported,
)
from dualview.synth.limits import Limits
from dualview.synth.parser_versions import ParserVersion, parser_version
from dualview.synth.parsing import clean_text

Status = Literal["ok", "impossible", "rejected", "skipped", "error"]
STATUSES: tuple[str, ...] = ("ok", "impossible", "rejected", "skipped", "error")


@dataclass
class Outcome:
    """The result of one unit. ``records`` (JSON dicts) go to the output when ``ok``.

    ``counts`` are task-specific counters the runner sums over the run (e.g. verify's passes).
    """

    status: Status
    records: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    raw: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    latencies: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The fields as a dict for ``json.dumps``; shallow (``dataclasses.asdict`` deep-copies
        every record, a sizeable share of the runner's CPU per unit), so do not mutate it."""
        return {name: getattr(self, name) for name in FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        """The outcome stored by `to_json`; ``ValueError`` for anything else (a
        damaged cache entry must be redone, never reused)."""
        outcome = cls(**data)
        shapes = (
            (outcome.records, list),
            (outcome.raw, list),
            (outcome.counts, dict),
            (outcome.reason, str),
        )
        if outcome.status not in STATUSES or not all(isinstance(v, t) for v, t in shapes):
            raise ValueError("not a stored outcome")
        if not all(isinstance(r, dict) for r in outcome.records):
            raise ValueError("not a stored outcome")
        return outcome


FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Outcome))


class Turnstile:
    """Lets the coroutines that pass it resume one per event-loop iteration.

    Without it, answers that arrive together are all handled in one loop iteration, and the
    requests they free slots for go out only after the whole batch was handled (asyncio runs
    ready callbacks in FIFO order). With a server whose answers take about the same time,
    the runner then sends, waits and handles in lockstep, and its handling time per batch
    (concurrency x CPU per unit) adds to every round trip. Passing answers one at a time
    lets each freed slot's request go out while the rest are still being handled, so the
    requests spread out in time and the lockstep dissolves (``benchmarks/synth_throughput.py``).
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()  # FIFO: first come, first through

    async def through(self) -> None:
        async with self._lock:
            await asyncio.sleep(0)


class LLM:
    """The LLM as one task run sees it: prompt in, text out; usage is accumulated here."""

    def __init__(
        self,
        backend: ChatBackend,
        params: SamplingParams,
        limits: Limits | None = None,
        replay: list[str] | None = None,
        turnstile: Turnstile | None = None,
    ) -> None:
        self.backend = backend
        self.params = params
        self.limits = limits
        self.turnstile = turnstile
        self.tokens_in = 0
        self.tokens_out = 0
        self.latencies: list[float] = []
        self.answers: list[str] = []
        # Answers the same prompts got before (see Runner: re-judging after a parser change);
        # handed out in order instead of asking the backend again.
        self._replay = list(replay or [])
        self.replayed = 0

    async def ask(self, prompt: str, regex: str | None = None) -> str:
        """Send ``prompt`` as one user message; returns the answer text. ``regex`` constrains
        the answer (constrained output; the engine must support it)."""
        if self._replay:
            self.replayed += 1
            self.answers.append(self._replay.pop(0))
            return self.answers[-1]
        messages = [{"role": "user", "content": prompt}]
        reserved = 0
        if self.limits is not None:
            reserved = await self.limits.before_call(prompt, self.params.max_tokens)
        params = self.params.model_copy(update={"regex": regex}) if regex else self.params
        completion = await self.backend.complete(messages, params)
        if self.turnstile is not None:
            await self.turnstile.through()
        if self.limits is not None:
            self.limits.after_call(reserved, completion.tokens_in + completion.tokens_out)
        self.tokens_in += completion.tokens_in
        self.tokens_out += completion.tokens_out
        self.latencies.append(completion.latency_s)
        self.answers.append(clean_text(completion.text))
        return self.answers[-1]

    async def logodds(self, prompt: str, prefix: str, answers: tuple[str, str]) -> float:
        """``log p(answers[0]) - log p(answers[1])`` as the first token of the reply to
        ``prompt`` after its start ``prefix`` (one prompt pass, no generation; the backend
        must be an `AnswerScorer`). The raw answer kept for the cache is the number as text,
        so a re-judged unit replays it like any answer."""
        if self._replay:
            self.replayed += 1
            self.answers.append(self._replay.pop(0))
            return float(self.answers[-1])
        if not isinstance(self.backend, AnswerScorer):
            raise scoring_unsupported(f"backend {self.backend.identity}")
        reserved = 0
        if self.limits is not None:
            reserved = await self.limits.before_call(prompt, 1)
        messages = [{"role": "user", "content": prompt}]
        scored = await self.backend.score_answers(messages, prefix, answers)
        if self.turnstile is not None:
            await self.turnstile.through()
        if self.limits is not None:
            self.limits.after_call(reserved, scored.tokens_in)
        self.tokens_in += scored.tokens_in
        self.latencies.append(scored.latency_s)
        self.answers.append(repr(scored.logodds))
        return scored.logodds

    def stamp(self, outcome: Outcome) -> Outcome:
        """Copy the usage and raw answers of this run into ``outcome``."""
        outcome.tokens_in = self.tokens_in
        outcome.tokens_out = self.tokens_out
        outcome.latencies = list(self.latencies)
        outcome.raw = list(self.answers)
        return outcome


class Task(Protocol):
    """An LLM task over a record file (reverse, seed, poison, verify)."""

    name: str

    def fingerprint(self) -> dict[str, Any]:
        """Everything that changes the task's answers: template hash and task settings."""
        ...

    def earlier_fingerprints(self) -> list[dict[str, Any]]:
        """Fingerprints of the same prompts under older parsers, newest first: their cached
        raw answers can be judged again without asking the LLM."""
        ...

    def units(self, records: Iterable[Record]) -> Iterator[list[Record]]:
        """Group the input stream into units (default: one record each)."""
        ...

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        """Handle one unit; never raises for bad LLM text (that is a ``rejected`` outcome)."""
        ...

    def summary(self, counts: dict[str, int]) -> dict[str, Any]:
        """Task-level figures from the summed ``Outcome.counts`` (e.g. swap accuracy)."""
        ...


def one_per_record(records: Iterable[Record]) -> Iterator[list[Record]]:
    """The default grouping: every record is its own unit."""
    for record in records:
        yield [record]


class TemplateTask:
    """Defaults shared by the prompt-template tasks: the cache fingerprint is the template's
    hash plus the task config (plus ``parser_version`` once it is above 1); one record per
    unit; no task-level summary.

    The cache stores verdicts, not only raw answers, so a change to how a task parses or
    judges answers changes its parser version, derived from the task's source
    (`dualview.synth.parser_versions`): cached results of an older parser are then judged
    again, from their cached raw answers (the prompts are the same), instead of being
    reused as they are. A plugin's task declares its own ``parser_version``.
    """

    config: Any
    template: Any
    parser_version: int = 1  # a plugin task's own; the built-in tasks' are derived

    def fingerprint(self) -> dict[str, Any]:
        version = self._parser_version()
        return self._fingerprint(version.number, version.digest)

    def earlier_fingerprints(self) -> list[dict[str, Any]]:
        return [self._fingerprint(v) for v in self._parser_version().earlier()]

    def _parser_version(self) -> ParserVersion:
        return parser_version(type(self), self.parser_version)

    def _fingerprint(self, parser_version: int, digest: str | None = None) -> dict[str, Any]:
        parts = {"template": self.template.sha256, "config": config_key(self.config)}
        if parser_version > 1:  # version 1 keeps the keys of caches written before it
            parts["parser_version"] = parser_version
        if digest is not None:  # source edited and not pinned: never reuse older answers
            parts["parser_source"] = digest
        return parts

    def units(self, records: Iterable[Record]) -> Iterator[list[Record]]:
        return one_per_record(records)

    def summary(self, counts: dict[str, int]) -> dict[str, Any]:
        return {}


def config_key(config: Any) -> dict[str, Any]:
    """A task config as its cache key: the JSON dump without the options named in the
    config's ``keyed_when_set`` while they hold their default, so that adding an option
    leaves the keys of every run that does not use it unchanged."""
    data = config.model_dump(mode="json")
    fields = type(config).model_fields
    for name in getattr(config, "keyed_when_set", ()):
        if getattr(config, name) == fields[name].get_default(call_default_factory=True):
            data.pop(name, None)
    return data


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` (at a word boundary when possible) for a prompt."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0]
    return cut + " …"


@dataclass(frozen=True)
class TaskKind:
    """A synthesis task as a job and the CLI know it (`dualview.synth.jobs.TASKS`): the
    class of its settings (a job's ``task:`` block), the factory that makes the `Task` from
    them, and one line for ``dualview NAME --help``."""

    config: type[BaseModel]
    build: Callable[[Any], Task]
    help: str
