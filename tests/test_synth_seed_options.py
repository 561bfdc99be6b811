"""The seed task's small-model options (issue 36, the seeded arm): worked examples before the
task and constrained output. Unset, they leave the prompt and the cache key as they were;
set, the examples reach the prompt, copying one is rejected, and the reply format reaches the
engine as a regular expression that the parser's well-formed replies match."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from dualview.data.jsonl import iter_records
from dualview.data.schema import Document, Record
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.backends.openai_http import OpenAIBackend
from dualview.synth.runner import Runner, RunnerConfig
from dualview.synth.seed import SeedConfig, SeedExample, SeedTask, parse_seed, seed_regex
from dualview.synth.templates import load_template
from dualview.synth.testing import StubReply, StubServer, prompt_of

FIXTURE = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"
NEG_A = (
    "Gardeners in cold regions sow tomato seeds outdoors in late spring after the last "
    "frost has passed for the year."
)
NEG_B = (
    "Commercial farms plant field tomatoes in rows with drip irrigation once the soil has "
    "warmed to about sixteen degrees."
)
EXAMPLE = SeedExample(
    query="benefits of green tea",
    positive="A randomized trial with 240 adults found that three cups of green tea a day "
    "lowered LDL cholesterol.",
    instruction="I want evidence from clinical trials in humans; animal or lab studies do "
    "not count.",
    negatives=[
        "In mice fed a high-fat diet, green tea catechins reduced weight gain and improved "
        "insulin sensitivity compared with untreated animals.",
        "A laboratory study found that green tea extract slowed the growth of cultured liver "
        "cells exposed to a toxin over two days.",
    ],
)


def reply(instruction: str, negatives: list[str]) -> str:
    """A reply in the prompt's form (one block a line)."""
    blocks = "".join(f"<negative>{n}</negative>\n" for n in negatives)
    return f"<answer>\n<instruction>{instruction}</instruction>\n{blocks}</answer>"


class ScriptedLLM:
    """Answers every prompt with ``text`` and records the prompts and regexes it was given."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[tuple[str, str | None]] = []
        self.backend = type("Backend", (), {"identity": "scripted"})()

    async def ask(self, prompt: str, regex: str | None = None) -> str:
        self.calls.append((prompt, regex))
        return self.text


def plain_record() -> Record:
    return Record(
        id="q1",
        view="plain",
        query="best time to plant tomatoes",
        instruction="",
        positives=[Document.from_text("Tomatoes in a heated greenhouse go in in early March.")],
    )


def test_unset_options_keep_the_prompt_and_the_cache_key() -> None:
    task = SeedTask()
    assert task.template.sha256 == load_template("seed").sha256
    assert not {"examples", "constrained"} & set(task.fingerprint()["config"])
    # the edit is pinned at the version of the caches made before these options
    assert task.fingerprint()["parser_version"] == 4 and "parser_source" not in task.fingerprint()
    llm = ScriptedLLM(reply("Only greenhouse growing counts.", [NEG_A, NEG_B]))
    outcome = asyncio.run(task.run([plain_record()], llm))
    prompt, regex = llm.calls[0]
    assert outcome.status == "ok" and regex is None
    assert prompt.startswith("You write training data") and "Example 1" not in prompt


def test_examples_reach_the_prompt_and_the_key() -> None:
    task = SeedTask(SeedConfig(examples=[EXAMPLE]))
    llm = ScriptedLLM(reply("Only greenhouse growing counts.", [NEG_A, NEG_B]))
    outcome = asyncio.run(task.run([plain_record()], llm))
    prompt = llm.calls[0][0]
    assert outcome.status == "ok"
    # the example comes first, with its reply, then the task with the record's query last
    assert prompt.index(EXAMPLE.instruction) < prompt.index("You write training data")
    assert f"<negative>{EXAMPLE.negatives[1]}</negative>" in prompt
    assert prompt.rstrip().endswith("Reply:") and "best time to plant tomatoes" in prompt
    assert task.fingerprint() != SeedTask().fingerprint()
    assert task.fingerprint()["template"] != SeedTask().fingerprint()["template"]
    assert task.fingerprint()["config"]["examples"][0]["query"] == EXAMPLE.query


def test_copying_an_example_is_an_echo_not_an_answer() -> None:
    task = SeedTask(SeedConfig(examples=[EXAMPLE]))
    cases = {
        "instruction": reply(EXAMPLE.instruction, [NEG_A, NEG_B]),
        "reworded instruction": reply(
            "I want evidence from clinical trials in adults; animal or lab studies do not count.",
            [NEG_A, NEG_B],
        ),
        "negative": reply("Only greenhouse growing counts.", [NEG_A, EXAMPLE.negatives[0]]),
    }
    for case, text in cases.items():
        outcome = asyncio.run(task.run([plain_record()], ScriptedLLM(text)))
        assert (outcome.status, outcome.reason.split(":")[0]) == ("rejected", "echoes_prompt"), case
    # without the examples in the config, the same reworded instruction is an answer
    assert parse_seed(cases["reworded instruction"], "P", (), SeedConfig()).ok


def test_an_example_must_show_the_reply_the_task_asks_for() -> None:
    with pytest.raises(ValidationError, match=r"examples\[1\] shows 2 negative.*n_negatives is 1"):
        SeedConfig(n_negatives=1, examples=[EXAMPLE])
    assert SeedConfig(n_negatives=2, examples=[EXAMPLE]).examples[0] == EXAMPLE


@pytest.mark.parametrize("n", [1, 2, 3])
def test_constrained_format_matches_what_the_parser_accepts(n: int) -> None:
    neg_c = (
        "Balcony growers start cherry tomatoes in pots in April and bring them in on cold nights."
    )
    negatives = [NEG_A, NEG_B, neg_c][:n]
    good = reply("Only greenhouse growing counts.", negatives)
    assert re.fullmatch(seed_regex(n), good)
    assert parse_seed(good, "P", (), SeedConfig(n_negatives=n)).ok
    assert not re.fullmatch(
        seed_regex(n), reply("Only greenhouse growing counts.", [*negatives, NEG_B])
    )
    assert not re.fullmatch(
        seed_regex(n), good.replace("</instruction>", "</instruction> and more <b>")
    )
    assert not re.fullmatch(seed_regex(n), good + "\n<answer>again</answer>")


def test_constrained_output_reaches_the_engine(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def responder(request: dict) -> StubReply:
        seen.append(request.get("guided_regex"))
        assert "Example 1" in prompt_of(request)
        return StubReply(reply("Only passages written for parents count here.", [NEG_A, NEG_B]))

    task = SeedTask(SeedConfig(constrained=True, examples=[EXAMPLE]))
    with StubServer(responder) as server:
        backend = OpenAIBackend(
            BackendConfig(kind="openai", model="stub", base_url=server.base_url)
        )
        runner = Runner(task, backend, SamplingParams(), RunnerConfig(concurrency=2))
        runner.run(lambda: task.units(iter_records(FIXTURE)), tmp_path / "seeded.jsonl")
    records = list(iter_records(tmp_path / "seeded.jsonl"))
    assert seen and set(seen) == {seed_regex(2)}
    assert len(records) == len(seen) and all(
        r.instruction_negatives[1].text == NEG_B for r in records
    )
