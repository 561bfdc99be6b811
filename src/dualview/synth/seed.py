"""Instruction seeding (Promptriever's recipe): plain (query, positive) pairs become ``orig``
records. The LLM writes an instruction the positive satisfies and 1-3 new passages on the
query's topic that break it; those passages are the record's instruction negatives."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError

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
from dualview.synth.templates import load_template


class SeedConfig(StrictModel):
    """Settings of the ``seed`` task; part of the cache key."""

    n_negatives: int = Field(default=2, ge=1, le=3)
    template: Path | None = None
    min_words: int = 3
    max_chars: int = 600
    negative_min_words: int = 12
    negative_max_chars: int = 2000
    max_passage_chars: int = 1500


def parse_seed(
    text: str, positive: str, fragments: tuple[str, ...], config: SeedConfig
) -> Parsed[tuple[str, list[str]]]:
    """(instruction, negatives) from an answer, or a rejection with its reason."""
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
        self.template = load_template("seed", self.config.template)

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        record = unit[0]
        positive = record.positives[0]
        prompt = self.template.render(
            query=record.query,
            positive=truncate(positive.text, self.config.max_passage_chars),
            n_negatives=self.config.n_negatives,
        )
        parsed = parse_seed(
            await llm.ask(prompt), positive.text, self.template.fragments, self.config
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
