"""Polarity reversal (the dual-view method): one ``orig`` record in, its ``dv`` record out.

For a record with at least one instruction negative, one of them is chosen as N* (the first,
or one drawn with a seed). The LLM writes a new instruction under which N* is relevant and the
positives and every other instruction negative are not, or answers ``None``. The dual-view
record keeps the query and the hard negatives, takes N* as its positive and the old positives
plus the other instruction negatives as its instruction negatives; ``parent_id`` names the
original and ``meta`` records N*, the original instruction and the original positive.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError

from dualview.config import StrictModel
from dualview.data.schema import Record
from dualview.synth.parsing import (
    Parsed,
    accept,
    echoes,
    impossible,
    is_none_answer,
    length_problem,
    near_copy,
    normalize,
    only_blocks,
    reject,
    single_field,
    the_answer,
)
from dualview.synth.task import LLM, Outcome, TemplateTask, truncate
from dualview.synth.templates import PromptTemplate, load_template

# The prompt's passage labels; an instruction naming one was written for the prompt, not a user.
_PASSAGE_LABEL = re.compile(r"\bTARGET\b|\[(?:R|T|O)\d*\]")
# The reply format as a regular expression, for constrained output (``constrained: true``).
REVERSE_REGEX = r"<answer>(None|<new_instruction>[^<>]+</new_instruction>)</answer>"


class ReverseExample(StrictModel):
    """A worked example shown in the prompt; ``new_instruction`` None shows an impossible case."""

    query: str
    instruction: str
    positive: str
    target: str
    others: list[str] = Field(default_factory=list)
    new_instruction: str | None


DEFAULT_EXAMPLES = [
    ReverseExample(
        query="benefits of green tea",
        instruction="I want evidence from clinical trials in humans; animal or lab studies "
        "do not count.",
        positive="A randomized controlled trial with 240 adults found that drinking three "
        "cups of green tea a day lowered LDL cholesterol over twelve weeks.",
        target="In mice fed a high-fat diet, green tea catechins reduced weight gain and "
        "improved insulin sensitivity compared with untreated animals.",
        others=["Green tea is brewed at lower temperatures than black tea to avoid bitterness."],
        new_instruction="I am only interested in results from animal experiments; studies "
        "on human participants are not relevant, and neither is advice on brewing.",
    )
]


class ReverseConfig(StrictModel):
    """Settings of the ``synth`` (reverse) task; all of them are part of the cache key."""

    # Which instruction negative becomes N*: the first one, one drawn per record with `seed`,
    # or the one whose id is ``meta.n_star`` (as marked in the gold set).
    n_star: Literal["first", "random", "meta"] = "first"
    seed: int = 0
    # Worked examples in the prompt; None = the bundled one-shot example, [] = zero-shot.
    examples: list[ReverseExample] | None = None
    template: Path | None = None
    min_words: int = 3
    max_chars: int = 600
    max_passage_chars: int = 1500
    # Constrain the answer to the reply format (`REVERSE_REGEX`; engines that support it).
    constrained: bool = False

    # Options that enter the cache key only when set (`dualview.synth.task.config_key`).
    keyed_when_set: ClassVar[tuple[str, ...]] = ("constrained",)


def choose_n_star(record: Record, mode: str, seed: int) -> int | None:
    """Index of N* among the record's instruction negatives (stable per record id and seed);
    with mode ``meta`` the negative named by ``meta.n_star``, None when it names none."""
    if mode == "meta":
        marked = record.meta.get("n_star")
        ids = [d.id for d in record.instruction_negatives]
        return ids.index(marked) if marked in ids else None
    if mode == "first" or len(record.instruction_negatives) == 1:
        return 0
    rng = random.Random(f"{seed}:{record.id}")
    return rng.randrange(len(record.instruction_negatives))


def parse_reverse(
    text: str,
    original: str,
    fragments: tuple[str, ...],
    min_words: int = 3,
    max_chars: int = 600,
    inputs: tuple[str, ...] = (),
    examples: tuple[str, ...] = (),
) -> Parsed[str]:
    """The new instruction from an answer, ``impossible`` for ``<answer>None</answer>``, or a
    rejection: no/ambiguous answer, stray text, empty, same as the original, an echo of the
    prompt (including a reworded copy of a worked example's instructions, ``examples``: its
    original or its answer), or an absurd length."""
    answer = the_answer(text)
    if not answer.ok:
        return answer
    content = answer.value or ""
    if is_none_answer(content):
        return impossible()
    if not only_blocks(content, ["new_instruction"]):
        return reject("malformed", "text outside <new_instruction> inside <answer>")
    field = single_field(content, "new_instruction")
    if not field.ok:
        return reject("empty_instruction", field.reason) if "empty" in field.reason else field
    instruction = field.value or ""
    if is_none_answer(instruction):
        return impossible()
    if normalize(instruction) == normalize(original):
        return reject("same_as_original", "the new instruction repeats the original")
    if echoes(instruction, fragments, inputs):
        return reject("echoes_prompt", "the new instruction copies text of the prompt")
    if _PASSAGE_LABEL.search(instruction):
        return reject("echoes_prompt", "the new instruction names a passage label of the prompt")
    if near_copy(instruction, examples):
        return reject("echoes_prompt", "the new instruction rewords a worked example's answer")
    problem = length_problem(instruction, min_words, max_chars)
    if problem:
        return reject("absurd_length", problem)
    return accept(instruction)


def make_dv_record(record: Record, n_index: int, instruction: str, model: str) -> Record:
    """The dual view of ``record`` with N* = ``record.instruction_negatives[n_index]``."""
    n_star = record.instruction_negatives[n_index]
    others = [d for i, d in enumerate(record.instruction_negatives) if i != n_index]
    return Record(
        id=f"{record.id}-dv",
        parent_id=record.id,
        view="dv",
        query=record.query,
        instruction=instruction,
        positives=[n_star],
        instruction_negatives=[*record.positives, *others],
        hard_negatives=list(record.hard_negatives),
        meta={
            "n_star_id": n_star.id,
            "orig_instruction": record.instruction,
            "orig_positive_id": record.positives[0].id,
            "synth": {"task": "reverse", "model": model},
        },
    )


class ReverseTask(TemplateTask):
    """The runner task for polarity reversal (its parser version:
    `dualview.synth.parser_versions`)."""

    name = "reverse"

    def __init__(self, config: ReverseConfig | None = None) -> None:
        self.config = config or ReverseConfig()
        self.examples = DEFAULT_EXAMPLES if self.config.examples is None else self.config.examples
        # a worked example's instructions, its original and its answer: an answer that
        # copies or rewords either is the example echoed, not a reversal of the record
        self.example_texts = tuple(
            text for e in self.examples for text in (e.instruction, e.new_instruction) if text
        )
        base = load_template("reverse", self.config.template)
        self.template: PromptTemplate = base.with_fragments(list(self.example_texts))

    def prompt(self, record: Record, n_index: int) -> str:
        cut = self.config.max_passage_chars
        others = [d for i, d in enumerate(record.instruction_negatives) if i != n_index]
        return self.template.render(
            examples=[self._example_data(e) for e in self.examples],
            query=record.query,
            instruction=record.instruction,
            positives=[truncate(d.text, cut) for d in record.positives],
            target=truncate(record.instruction_negatives[n_index].text, cut),
            others=[truncate(d.text, cut) for d in others],
        )

    @staticmethod
    def _example_data(example: ReverseExample) -> dict[str, Any]:
        reply = (
            f"<answer><new_instruction>{example.new_instruction}</new_instruction></answer>"
            if example.new_instruction
            else "<answer>None</answer>"
        )
        return {**example.model_dump(), "reply": reply}

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        record = unit[0]
        if not record.instruction.strip():
            return Outcome("skipped", reason="no instruction to reverse")
        if not record.instruction_negatives:
            return Outcome("skipped", reason="no instruction negative")
        n_index = choose_n_star(record, self.config.n_star, self.config.seed)
        if n_index is None:
            return Outcome("skipped", reason="meta.n_star names no instruction negative")
        regex = REVERSE_REGEX if self.config.constrained else None
        text = await llm.ask(self.prompt(record, n_index), regex)
        parsed = parse_reverse(
            text,
            record.instruction,
            self.template.fragments,
            self.config.min_words,
            self.config.max_chars,
            inputs=(record.query, *(d.text for d in record.documents())),
            examples=self.example_texts,
        )
        if parsed.status != "ok":
            return Outcome(parsed.status, reason=parsed.reason)
        try:
            dv = make_dv_record(record, n_index, parsed.value or "", llm.backend.identity)
        except ValidationError as exc:
            return Outcome("rejected", reason=f"invalid_record: {exc.errors()[0]['msg']}")
        return Outcome("ok", records=[dv.to_json_dict()])
