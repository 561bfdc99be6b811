"""``dualview restate``: a synthesis task that asks the LLM to restate each record's
instruction and writes the record again with the answer as its instruction (id + suffix)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dualview.config import StrictModel
from dualview.data.schema import Record
from dualview.synth.task import LLM, Outcome, TaskKind, config_key, one_per_record

PROMPT = "Restate this search instruction in other words, on one line:\n{instruction}"


class RestateConfig(StrictModel):
    """The task's settings (a job's ``task:`` block)."""

    suffix: str = "-restated"


class RestateTask:
    """One record in, the same record with a restated instruction out."""

    name = "restate"

    def __init__(self, config: RestateConfig | None = None) -> None:
        self.config = config or RestateConfig()

    def fingerprint(self) -> dict[str, Any]:
        return {"prompt": PROMPT, "config": config_key(self.config)}

    def earlier_fingerprints(self) -> list[dict[str, Any]]:
        return []

    def units(self, records: Iterable[Record]) -> Iterator[list[Record]]:
        return one_per_record(records)

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        record = unit[0]
        if not record.instruction:
            return Outcome("skipped", reason="no instruction to restate")
        answer = (await llm.ask(PROMPT.format(instruction=record.instruction))).strip()
        if not answer:
            return Outcome("rejected", reason="empty answer")
        restated = record.model_copy(update={"id": record.id + self.config.suffix})
        return Outcome("ok", records=[{**restated.to_json_dict(), "instruction": answer}])

    def summary(self, counts: dict[str, int]) -> dict[str, Any]:
        return {}


KIND = TaskKind(RestateConfig, RestateTask, "Restate each record's instruction (a plugin task).")
