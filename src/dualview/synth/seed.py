"""Instruction seeding (Promptriever's recipe): plain (query, positive) pairs become ``orig``
records. The LLM writes an instruction the positive satisfies and 1-3 new passages on the
query's topic that break it; those passages are the record's instruction negatives.

For small models, two options as the reversal task has them: worked ``examples`` (shown
before the task, from other topics) and ``constrained`` output (the reply format as a
regular expression, `seed_regex`, for engines that support it). Both stay out of the cache
key while unset, so caches made without them keep their keys."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, ValidationError, model_validator

from dualview.config import StrictModel
from dualview.data.schema import Document, Record
from dualview.synth.parsing import (
    Parsed,
    accept,
    blocks,
    echoes,
    has_markup,
    length_problem,
    near_copy,
    only_blocks,
    reject,
    single_field,
    the_answer,
)
from dualview.synth.task import LLM, Outcome, TemplateTask, truncate
from dualview.synth.templates import PromptTemplate, load_template


class SeedExample(StrictModel):
    """A worked example shown before the task: a query, a passage that answers it, and the
    reply to give (an instruction the passage meets and passages that break it)."""

    query: str
    positive: str
    instruction: str
    negatives: list[str] = Field(min_length=1, max_length=3)


class SeedConfig(StrictModel):
    """Settings of the ``seed`` task; part of the cache key."""

    n_negatives: int = Field(default=2, ge=1, le=3)
    template: Path | None = None
    min_words: int = 3
    max_chars: int = 600
    negative_min_words: int = 12
    negative_max_chars: int = 2000
    max_passage_chars: int = 1500
    # Worked examples before the task (`seed_examples.jinja`); [] = zero-shot, as before.
    examples: list[SeedExample] = Field(default_factory=list)
    # Constrain the answer to the reply format (`seed_regex`; engines that support it).
    constrained: bool = False

    # Options that enter the cache key only when set (`dualview.synth.task.config_key`).
    keyed_when_set: ClassVar[tuple[str, ...]] = ("examples", "constrained")

    @model_validator(mode="after")
    def _examples_show_n_negatives(self) -> SeedConfig:
        for number, example in enumerate(self.examples, start=1):
            if len(example.negatives) != self.n_negatives:
                raise ValueError(
                    f"examples[{number}] shows {len(example.negatives)} negative passage(s) "
                    f"but n_negatives is {self.n_negatives}: an example must show the reply "
                    "the task asks for"
                )
        return self


def seed_regex(n_negatives: int) -> str:
    """The reply format of the seed prompt as a regular expression (constrained output):
    one instruction and exactly ``n_negatives`` passages, each on one line."""
    return (
        r"<answer>\n<instruction>[^<>\n]+</instruction>\n"
        rf"(<negative>[^<>\n]+</negative>\n){{{n_negatives}}}</answer>"
    )


def parse_seed(
    text: str,
    positive: str,
    fragments: tuple[str, ...],
    config: SeedConfig,
    examples: tuple[str, ...] = (),
) -> Parsed[tuple[str, list[str]]]:
    """(instruction, negatives) from an answer, or a rejection with its reason; an
    instruction that rewords a worked example's (``examples``) is an echo of the prompt."""
    answer = the_answer(text)
    if not answer.ok:
        return answer
    content = answer.value or ""
    if not only_blocks(content, ["instruction", "negative"]):
        return reject("malformed", "text outside <instruction>/<negative> inside <answer>")
    instruction = single_field(content, "instruction")
    if not instruction.ok:
        return instruction
    value = instruction.value or ""
    problem = length_problem(value, config.min_words, config.max_chars)
    if problem:
        return reject("absurd_length", f"instruction: {problem}")
    if echoes(value, fragments, (positive,)):
        return reject("echoes_prompt", "the instruction copies text of the prompt")
    if near_copy(value, examples):
        return reject("echoes_prompt", "the instruction rewords a worked example's")
    negatives = [" ".join(n.split()) for n in blocks(content, "negative")]
    if not 1 <= len(negatives) <= 3:
        return reject("malformed", f"{len(negatives)} <negative> blocks, expected 1 to 3")
    seen = [positive]
    for number, negative in enumerate(negatives, start=1):
        if not negative or has_markup(negative):
            return reject("malformed", f"negative {number} is empty or holds markup")
        problem = length_problem(negative, config.negative_min_words, config.negative_max_chars)
        if problem:
            return reject("absurd_length", f"negative {number}: {problem}")
        if echoes(negative, (), seen) or near_copy(negative, seen):
            return reject("duplicate_passage", f"negative {number} repeats another passage")
        if echoes(negative, fragments):
            return reject("echoes_prompt", f"negative {number} copies text of the prompt")
        seen.append(negative)
    if echoes(value, (), negatives) or near_copy(value, negatives):
        return reject("echoes_prompt", "the instruction repeats a negative passage")
    return accept((value, negatives))


class SeedTask(TemplateTask):
    """The runner task that turns plain records into instruction-bearing ``orig`` records."""

    name = "seed"

    def __init__(self, config: SeedConfig | None = None) -> None:
        self.config = config or SeedConfig()
        # an example's texts count as prompt text: copying one is an echo, not an answer
        self.example_texts = tuple(
            text for e in self.config.examples for text in (e.instruction, *e.negatives)
        )
        self.template = seed_template(self.config).with_fragments(list(self.example_texts))

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        record = unit[0]
        positive = record.positives[0]
        cut = self.config.max_passage_chars
        prompt = self.template.render(
            examples=[
                e.model_copy(update={"positive": truncate(e.positive, cut)})
                for e in self.config.examples
            ],
            query=record.query,
            positive=truncate(positive.text, cut),
            n_negatives=self.config.n_negatives,
        )
        regex = seed_regex(self.config.n_negatives) if self.config.constrained else None
        parsed = parse_seed(
            await llm.ask(prompt, regex),
            positive.text,
            self.template.fragments,
            self.config,
            self.example_texts,
        )
        if not parsed.ok:
            return Outcome(parsed.status, reason=parsed.reason)
        instruction, negatives = parsed.value or ("", [])
        try:
            seeded = Record(
                id=f"{record.id}-seed",
                view="orig",
                query=record.query,
                instruction=instruction,
                positives=list(record.positives),
                instruction_negatives=[Document.from_text(text) for text in negatives],
                hard_negatives=list(record.hard_negatives),
                meta={
                    "seeded_from": record.id,
                    "synth": {"task": "seed", "model": llm.backend.identity},
                },
            )
        except ValidationError as exc:
            return Outcome("rejected", reason=f"invalid_record: {exc.errors()[0]['msg']}")
        return Outcome("ok", records=[seeded.to_json_dict()])


def seed_template(config: SeedConfig) -> PromptTemplate:
    """The seed prompt: the task's template (bundled or ``config.template``), preceded by
    the worked examples (`seed_examples.jinja`) when there are any. The template's hash is
    in the cache key, so prompts with examples get keys of their own and prompts without
    them keep theirs."""
    task = load_template("seed", config.template)
    if not config.examples:
        return task
    shots = load_template("seed_examples")
    return PromptTemplate(task.name, shots.source + "\n" + task.source)
