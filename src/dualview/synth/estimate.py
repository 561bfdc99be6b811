"""The cost of a synthesis job before it runs: LLM calls, tokens, shared prefix, price, hours.

The estimate runs the task itself over the input, unit by unit, against a stand-in backend
that answers every prompt at once with a well-formed answer of the task's format
(`dualview.synth.testing.default_reply`), so it counts what a run would send:

- **calls**: one per LLM request the task makes on the success path, so verify counts one
  call per scenario (each view of a unit, plus the original of a lone dual view), and
  skipped units (e.g. reverse without an instruction negative) count none. Retries after
  HTTP errors are not predicted; a parse failure ends a unit, it is never retried.
- **prompt tokens**: the exact prompts, counted with the model's tokenizer when one is at
  hand offline (its chat template applied), otherwise with the labelled approximation
  ``ceil(characters / 4)`` per message (English prose; chat-template tokens not counted).
- **completion tokens**: the stand-in answers' tokens, i.e. a well-formed answer of the
  format, plus the bound ``calls x max_tokens``. Real answers differ in length.
- **shared prefix**: the longest prefix that every prompt of the run starts with (the
  template's instructions and worked examples), times the calls; the share of prompt
  tokens a server's prefix cache can reuse.
- **cost** from ``--price-per-mtok IN,OUT`` (currency per million prompt / completion
  tokens) and **server hours** from ``--server-tokens-per-s N`` (prompt + completion tokens
  the server processes per second, summed over its requests).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from dualview.data.schema import Record
from dualview.errors import ConfigError
from dualview.progress import make_progress
from dualview.synth.backends.base import AnswerScore, BackendConfig, Completion, SamplingParams
from dualview.synth.task import LLM, Task
from dualview.synth.testing import default_reply

APPROX_LABEL = "approximation: ceil(characters / 4) per message"
Messages = list[dict[str, str]]


def approx_tokens(text: str) -> int:
    """The approximate token count of ``text``: one token per 4 characters, rounded up."""
    return math.ceil(len(text) / 4)


@dataclass
class TokenCounter:
    """Counts the tokens of a chat request and of an answer; ``label`` says how."""

    label: str
    prompt: Callable[[Messages], int]
    text: Callable[[str], int]

    @classmethod
    def approximate(cls) -> TokenCounter:
        return cls(
            APPROX_LABEL, lambda m: sum(approx_tokens(x["content"]) for x in m), approx_tokens
        )

    @classmethod
    def for_backend(cls, backend: BackendConfig) -> TokenCounter:
        """The tokenizer the backend names (`BackendConfig.tokenizer_name`) when it loads
        offline (a local path or a cached Hub id), else the approximation."""
        name = backend.tokenizer_name()
        tokenizer = _local_tokenizer(name)
        if tokenizer is None:
            return cls.approximate()

        def prompt(messages: Messages) -> int:
            if getattr(tokenizer, "chat_template", None):
                text = tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=False
                )
                return len(tokenizer.encode(text, add_special_tokens=False))
            return sum(len(tokenizer.encode(m["content"])) for m in messages)

        def text(answer: str) -> int:
            return len(tokenizer.encode(answer, add_special_tokens=False))

        return cls(f"tokenizer of {name}", prompt, text)


def _local_tokenizer(name: str | None) -> Any:
    """The tokenizer of ``name`` from disk only (no download), or None."""
    if not name:
        return None
    try:
        from transformers import AutoTokenizer  # heavy: only when a model is named

        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception:  # no such local model, or no tokenizer files: fall back
        return None


def common_prefix(a: str, b: str) -> str:
    """The longest common prefix of two strings."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return a[:i]


class DryBackend:
    """A backend that answers every prompt with a well-formed stand-in and counts usage; it
    also scores answers (an `AnswerScorer`: log-odds 0, one prompt pass, nothing generated),
    so a log-odds judge is estimated like the others."""

    identity = "dry-run"

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.calls = 0
        self.prefix: str | None = None

    def _count(self, messages: Messages) -> int:
        """One call for ``messages``: the shared prefix so far; returns its prompt tokens."""
        self.calls += 1
        prompt = messages[-1]["content"]
        self.prefix = prompt if self.prefix is None else common_prefix(self.prefix, prompt)
        return self.counter.prompt(messages)

    async def score_answers(
        self, messages: Messages, prefix: str, answers: tuple[str, str]
    ) -> AnswerScore:
        return AnswerScore(0.0, tokens_in=self._count(messages))

    async def complete(self, messages: Messages, params: SamplingParams) -> Completion:
        tokens_in = self._count(messages)
        answer = default_reply({"messages": messages}).text
        return Completion(answer, tokens_in=tokens_in, tokens_out=self.counter.text(answer))

    async def aclose(self) -> None:
        pass


@dataclass
class Estimate:
    """The figures of one job (see module docstring)."""

    task: str
    units: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    completion_bound: int
    shared_prefix_tokens: int
    counter: str
    cost: float | None = None
    server_hours: float | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def shared_share(self) -> float:
        return self.shared_prefix_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def price(self, price_in: float, price_out: float) -> Estimate:
        self.cost = (self.prompt_tokens * price_in + self.completion_tokens * price_out) / 1e6
        return self

    def hours(self, tokens_per_s: float) -> Estimate:
        self.server_hours = (self.prompt_tokens + self.completion_tokens) / tokens_per_s / 3600
        return self

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "outputs"}
        return {**data, "shared_prefix_share": round(self.shared_share, 4)}

    def lines(self) -> list[str]:
        out = [
            f"estimate for {self.task}: {self.units:,} unit(s), {self.calls:,} LLM call(s)",
            f"  prompt tokens     {self.prompt_tokens:,} ({self.counter})",
            f"  completion tokens {self.completion_tokens:,} (well-formed answers; at most "
            f"{self.completion_bound:,} = calls x max_tokens)",
            f"  shared prefix     {self.shared_share:.1%} of prompt tokens "
            f"({self.shared_prefix_tokens:,}; reusable by a prefix cache)",
        ]
        if self.cost is not None:
            digits = 2 if self.cost >= 1 else 4
            out.append(
                f"  cost              {self.cost:,.{digits}f} (at the given prices per M tokens)"
            )
        if self.server_hours is not None:
            hours = self.server_hours
            out.append(f"  server time       {hours:,.2f} h ({hours * 60:,.1f} min)")
        return out


def estimate_task(
    task: Task,
    records: Iterable[Record],
    params: SamplingParams,
    counter: TokenCounter | None = None,
    keep_outputs: bool = False,
) -> Estimate:
    """Run ``task`` over ``records`` against `DryBackend`; the job's figures.

    ``keep_outputs``: keep the records the stand-in answers produce, so a pipeline can
    estimate the stage that reads them."""
    counter = counter or TokenCounter.approximate()
    backend = DryBackend(counter)
    units = prompt = completion = 0
    outputs: list[dict[str, Any]] = []

    async def run_all() -> None:
        nonlocal units, prompt, completion
        with make_progress() as progress:
            bar = progress.add_task(f"estimating {task.name}", total=None, status="")
            for unit in task.units(records):
                llm = LLM(backend, params)
                outcome = await task.run(unit, llm)
                units += 1
                prompt += llm.tokens_in
                completion += llm.tokens_out
                if keep_outputs and outcome.status == "ok":
                    outputs.extend(outcome.records)
                progress.update(bar, advance=1)

    asyncio.run(run_all())
    shared = counter.text(backend.prefix or "") * backend.calls if backend.calls > 1 else 0
    return Estimate(
        task=task.name,
        units=units,
        calls=backend.calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        completion_bound=backend.calls * params.max_tokens,
        shared_prefix_tokens=min(shared, prompt),
        counter=counter.label,
        outputs=outputs,
    )


class Prices(NamedTuple):
    """``--price-per-mtok IN,OUT``: currency per million prompt and completion tokens."""

    prompt: float
    completion: float


def _finite(text: str) -> float | None:
    """``text`` as a finite float, or None (not a number, nan, inf, or beyond a float)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_price(text: str) -> Prices:
    """``IN,OUT`` (price per million prompt and completion tokens): two finite numbers
    >= 0, checked where the option is parsed (`dualview.cli.options.PricePerMtok`)."""
    values = [_finite(part) for part in text.split(",")]
    if len(values) != 2 or any(v is None or v < 0 for v in values):
        raise ConfigError(
            f"--price-per-mtok {text!r}: expected IN,OUT, two finite numbers >= 0, e.g. 0.10,0.40"
        )
    return Prices(*(v for v in values if v is not None))


def parse_tokens_per_s(text: str) -> float:
    """``--server-tokens-per-s N``: a finite number > 0, checked where it is parsed."""
    value = _finite(text)
    if value is None or value <= 0:
        raise ConfigError(f"--server-tokens-per-s {text!r}: expected a finite number > 0")
    return value


def finish(estimate: Estimate, price: Prices | None, tokens_per_s: float | None) -> Estimate:
    """Add cost and server hours when asked for (``price`` and ``tokens_per_s`` as
    `parse_price` and `parse_tokens_per_s` return them)."""
    if price is not None:
        estimate.price(*price)
    if tokens_per_s is not None:
        estimate.hours(tokens_per_s)
    for name, value in (("cost", estimate.cost), ("server hours", estimate.server_hours)):
        if value is not None and not math.isfinite(value):
            raise ConfigError(f"estimate: the {name} is too large to print; check the figures")
    return estimate
