"""InF-IR poisoning: from (query Q+, instruction I+, positive P+) the LLM writes a changed
instruction I- and a changed query Q-, each making P+ irrelevant, plus the passages P1- and P2-
that fit them. The result is InF-IR's three tuples (I+,Q+,P+), (I-,Q+,P1-), (I+,Q-,P2-), laid
out as three records exactly as the ``infir`` format adapter does."""

from __future__ import annotations

from pathlib import Path

from dualview.config import StrictModel
from dualview.data.formats.infir import convert_row
from dualview.data.schema import Record
from dualview.errors import DataError
from dualview.synth.parsing import (
    Parsed,
    accept,
    echoes,
    length_problem,
    normalize,
    only_blocks,
    reject,
    single_field,
    the_answer,
)
from dualview.synth.task import LLM, Outcome, TemplateTask, truncate
from dualview.synth.templates import load_template

FIELDS = (
    "changed_instruction",
    "changed_instruction_passage",
    "changed_query",
    "changed_query_passage",
)


class PoisonConfig(StrictModel):
    """Settings of the ``poison`` task; part of the cache key."""

    template: Path | None = None
    min_words: int = 2
    max_chars: int = 600
    passage_min_words: int = 12
    passage_max_chars: int = 2000
    max_passage_chars: int = 1500


def parse_poison(
    text: str,
    query: str,
    instruction: str,
    positive: str,
    fragments: tuple[str, ...],
    config: PoisonConfig,
) -> Parsed[dict[str, str]]:
    """The four fields from an answer, or a rejection with its reason."""
    answer = the_answer(text)
    if not answer.ok:
        return answer
    content = answer.value or ""
    if not only_blocks(content, list(FIELDS)):
        return reject("malformed", "text outside the expected blocks inside <answer>")
    values: dict[str, str] = {}
    for name in FIELDS:
        field = single_field(content, name)
        if not field.ok:
            return field
        value = field.value or ""
        is_passage = name.endswith("_passage")
        problem = (
            length_problem(value, config.passage_min_words, config.passage_max_chars)
            if is_passage
            else length_problem(value, config.min_words, config.max_chars)
        )
        if problem:
            return reject("absurd_length", f"{name}: {problem}")
        if echoes(value, fragments):
            return reject("echoes_prompt", f"{name} copies text of the prompt")
        values[name] = value
    if normalize(values["changed_instruction"]) == normalize(instruction):
        return reject("same_as_original", "the changed instruction repeats the original")
    if normalize(values["changed_query"]) == normalize(query):
        return reject("same_as_original", "the changed query repeats the original")
    passages = {normalize(positive), normalize(values["changed_instruction_passage"])}
    if len(passages) < 2 or normalize(values["changed_query_passage"]) in passages:
        return reject("duplicate_passage", "a written passage repeats another passage")
    return accept(values)


class PoisonTask(TemplateTask):
    """The runner task for InF-IR poisoning; one ``orig`` record in, three records out."""

    name = "poison"

    def __init__(self, config: PoisonConfig | None = None) -> None:
        self.config = config or PoisonConfig()
        self.template = load_template("poison", self.config.template)

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        record = unit[0]
        if not record.instruction.strip():
            return Outcome("skipped", reason="no instruction to poison")
        positive = record.positives[0]
        prompt = self.template.render(
            query=record.query,
            instruction=record.instruction,
            positive=truncate(positive.text, self.config.max_passage_chars),
        )
        parsed = parse_poison(
            await llm.ask(prompt),
            record.query,
            record.instruction,
            positive.text,
            self.template.fragments,
            self.config,
        )
        if not parsed.ok:
            return Outcome(parsed.status, reason=parsed.reason)
        values = parsed.value or {}
        row = {
            "id": f"{record.id}-inf",
            "query_positive": record.query,
            "instruction_positive": record.instruction,
            "document_positive": {
                "docid": positive.id,
                "title": positive.title,
                "text": positive.text,
            },
            "query_negative": values["changed_query"],
            "instruction_negative": values["changed_instruction"],
            "hard_negative_document_1": {"text": values["changed_instruction_passage"]},
            "hard_negative_document_2": {"text": values["changed_query_passage"]},
        }
        try:
            records = convert_row(row, f"poison output of {record.id}", 0)
        except DataError as exc:
            return Outcome("rejected", reason=f"invalid_record: {exc.field}: {exc.message}")
        origin = {
            "poisoned_from": record.id,
            "synth": {"task": "poison", "model": llm.backend.identity},
        }
        return Outcome(
            "ok", records=[{**r.to_json_dict(), "meta": {**r.meta, **origin}} for r in records]
        )
