"""The log-odds judge (issue 36 item 2): a score per passage, the log-odds of ``yes`` against
``no`` as the judge's first reply token in both orders of the two texts, compared between P+
and N* under each instruction, so neither a position bias nor a threshold decides a verdict.
Scripted scorers here; the engines' scoring on a tiny random LM and a fake OpenVINO pipeline."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from dualview.data.jsonl import iter_records
from dualview.data.schema import Record
from dualview.errors import DualviewError
from dualview.synth import bench
from dualview.synth.backends.base import AnswerScore, BackendError, Completion, SamplingParams
from dualview.synth.backends.local_engines import TransformersEngine
from dualview.synth.runner import Runner
from dualview.synth.task import LLM
from dualview.synth.verify import VerifyConfig, VerifyTask
from tests.test_synth_bench import gold_instances
from tests.test_synth_pointwise import gold_dir  # noqa: F401  (fixture)
from tests.tiny_lm import byte_tokenizer, save_tiny_lm

# Scripted judges: "topic" scores a passage by its topic alone (P+ above N* whatever the
# instruction, so it gets the reversal wrong); "biased" adds +5 to every passage shown first.
TOPIC_ONLY = {"beta-001"}


def instance_of(prompt: str):
    query = re.search(r"Query: (.*)", prompt).group(1).strip()
    return next(i for i in gold_instances() if i.query == query)


def scripted_logodds(prompt: str) -> float:
    """A judge that follows the instruction (except `TOPIC_ONLY`), with a position bias."""
    inst = instance_of(prompt)
    instruction = re.search(r"Instruction: (.*)", prompt).group(1).strip()
    passage = re.search(r"Passage: (.*)", prompt).group(1).strip()
    bias = 5.0 if prompt.index("Passage:") < prompt.index("Query:") else 0.0
    if inst.instance in TOPIC_ONLY or instruction == inst.instruction:
        return bias + (1.0 if passage == inst.positive.text else -1.0)
    scores = {inst.n_star.text: 0.5, inst.positive.text: -0.5}
    return bias + scores.get(passage, -1.0)


class ScriptedScorer:
    """A `ChatBackend` that is also an `AnswerScorer` scoring each prompt with ``score``,
    recording what it was asked."""

    identity = "scripted-scorer"

    def __init__(self, score: Callable[[str], float] = scripted_logodds) -> None:
        self.score = score
        self.asked: list[tuple[str, str, tuple[str, str]]] = []

    async def complete(self, messages, params) -> Completion:  # pragma: no cover - unused
        raise AssertionError("a judge that scores answers never generates")

    async def score_answers(self, messages, prefix, answers) -> AnswerScore:
        prompt = messages[-1]["content"]
        self.asked.append((prompt, prefix, answers))
        return AnswerScore(self.score(prompt), tokens_in=len(prompt) // 4, latency_s=0.5)

    async def aclose(self) -> None:
        pass


class ChatOnly:
    """A backend that generates but cannot score (an OpenAI-compatible server)."""

    identity = "openai:stub"

    async def complete(self, messages, params) -> Completion:  # pragma: no cover - unused
        return Completion("<answer>yes</answer>")

    async def aclose(self) -> None:
        pass


def a_pair(folder: Path, instance: str) -> list[Record]:
    records = list(iter_records(folder / "train.jsonl"))
    orig = next(r for r in records if r.view == "orig" and instance in r.id)
    dv = next(r for r in records if r.parent_id == orig.id)
    return list(bench.key_passages((orig, dv)))  # P+ and N* as the only candidates


def test_logodds_judge_compares_the_two_passages_under_each_instruction(
    gold_dir: Path,  # noqa: F811
) -> None:
    scorer = ScriptedScorer()
    task = VerifyTask(VerifyConfig(scoring="logodds", distractors=0))
    llm = LLM(scorer, task_params())
    right = llm.stamp(asyncio.run(task.run(a_pair(gold_dir, "alpha-001"), llm)))
    assert right.status == "ok"
    assert right.counts["passed_orig"] == right.counts["passed_dv"] == 1
    # Every passage of both scenarios, each in both orders, with the reply opened as
    # <answer> and yes against no; the +5 for the passage shown first cancels out.
    assert len(scorer.asked) == len({p for p, _, _ in scorer.asked}) == 2 * 2 * 2
    assert {(prefix, answers) for _, prefix, answers in scorer.asked} == {
        ("<answer>", ("yes", "no"))
    }
    orders = [p.index("Passage:") < p.index("Query:") for p, _, _ in scorer.asked]
    assert orders.count(True) == orders.count(False) == 4
    # A topic-only judge prefers P+ under both instructions: the reversal scenario fails,
    # named with both scores (each the mean of its two orders: the bias adds 5 / 2).
    topic = asyncio.run(task.run(a_pair(gold_dir, "beta-001"), LLM(scorer, task_params())))
    assert topic.status == "rejected" and topic.counts["passed_orig"] == 1
    assert "passed_dv" not in topic.counts
    assert re.fullmatch(r"dv: \S+ outscored the intended \S+ \(log-odds 3\.500 vs 1\.500\)",
                        topic.reason)  # fmt: skip
    # The raw answers are the scores as text: a re-judged unit replays them, asking nothing.
    assert [float(a) for a in right.raw] == [scripted_logodds(p) for p, _, _ in scorer.asked[:8]]
    replay = ScriptedScorer()
    again = asyncio.run(
        task.run(a_pair(gold_dir, "alpha-001"), LLM(replay, task_params(), replay=right.raw))
    )
    assert again.status == "ok" and replay.asked == []


def task_params() -> SamplingParams:
    return SamplingParams(max_tokens=8)


def test_a_backend_without_log_probabilities_is_one_error_naming_it(
    gold_dir: Path,  # noqa: F811
) -> None:
    task = VerifyTask(VerifyConfig(scoring="logodds", distractors=0))
    with pytest.raises(BackendError, match=r"backend openai:stub cannot score answers .*logodds"):
        asyncio.run(task.run(a_pair(gold_dir, "alpha-001"), LLM(ChatOnly(), task_params())))


def test_the_scoring_enters_the_cache_key_only_when_set() -> None:
    default = VerifyTask().fingerprint()
    logodds = VerifyTask(VerifyConfig(scoring="logodds")).fingerprint()
    assert "scoring" not in default["config"] and logodds["config"]["scoring"] == "logodds"
    pointwise = VerifyTask(VerifyConfig(scoring="pointwise")).fingerprint()
    assert logodds["template"] == pointwise["template"] != default["template"]


def judge_bench(
    scorer: ScriptedScorer, scoring: str, out: Path, gold: Path, monkeypatch
) -> tuple[dict, str]:
    """bench-synth's judge check with ``scorer`` as the judge: its report and bench.md."""
    monkeypatch.setattr(
        bench,
        "make_runner",
        lambda task, backend, params, config: Runner(task, scorer, params, config),
    )
    verify = VerifyConfig(scoring=scoring, distractors=0)
    config = bench.BenchConfig(judge_only=True, gold_dir=gold, verify=verify)
    report = bench.SynthBench(config, out).run()
    return report["judge"], (out / "bench.md").read_text()


def test_bench_checks_the_logodds_judge_with_a_wilson_interval(
    tmp_path: Path,
    gold_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge, table = judge_bench(ScriptedScorer(), "logodds", tmp_path / "o", gold_dir, monkeypatch)
    assert judge["scoring"] == "logodds"
    positive, negative = judge["gold_positive"], judge["gold_negative"]
    assert (positive["correct"], positive["n"]) == (5, 6)  # beta-001's reversal lost
    assert (negative["correct"], negative["n"]) == (6, 6)
    assert judge["balanced_accuracy"] == pytest.approx(11 / 12, abs=1e-4)
    assert judge["balanced_ci95"][0] < 0.75 and judge["trusted"] is False
    assert positive["seconds_per_record"] == pytest.approx(8 * 0.5)  # 8 prompts a pair
    assert "| N* outscores P+ under the gold reversal | 6 | 83% [44, 97] |" in table
    assert "| balanced (both) | 12 | 92% [65, 99] |" in table


@pytest.fixture
def tiny_engine(tmp_path: Path) -> TransformersEngine:
    """The transformers engine on a tiny random Qwen2 LM whose tokenizer has ``yes`` and
    ``no`` as one token each and a one-line chat template."""
    tokenizer = byte_tokenizer(tmp_path, whole_words=("yes", "no"))
    tokenizer.chat_template = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    tokenizer.save_pretrained(tmp_path)
    save_tiny_lm(tmp_path, "qwen2", tokenizer, initializer_range=0.2, tie_word_embeddings=False)
    model = SimpleNamespace(path=tmp_path, is_gguf=False)
    return TransformersEngine(model, n_ctx=512, n_threads=1)  # type: ignore[arg-type]


def test_transformers_engine_scores_the_reply_start_in_one_pass(
    tiny_engine: TransformersEngine,
) -> None:
    messages = [{"role": "user", "content": "Is the sky blue?"}]
    scored = tiny_engine.score_answers(messages, "<answer>", ("yes", "no"))
    tokenizer, model = tiny_engine._tokenizer, tiny_engine._model
    text = "<user>Is the sky blue?<assistant><answer>"
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logprobs = model(input_ids=ids).logits[0, -1].log_softmax(-1)
    yes, no = (tokenizer.convert_tokens_to_ids(w) for w in ("yes", "no"))
    assert scored.logodds == pytest.approx(float(logprobs[yes] - logprobs[no]), abs=1e-5)
    assert scored.tokens_in == ids.shape[1]
    flipped = tiny_engine.score_answers(messages, "<answer>", ("no", "yes"))
    assert flipped.logodds == pytest.approx(-scored.logodds, abs=1e-6)


class FakePipe:
    """OpenVINO GenAI's pipeline as the engine uses it: a generation forced by the regex,
    scored with the token's log-probability (only when ``logprobs`` is set)."""

    def __init__(self) -> None:
        self.configs: list = []
        self.logprobs = {"yes": -0.4, "no": -1.3}

    def generate(self, prompts, config):
        self.configs.append(config)
        answer = config.structured_output_config.regex.replace("\\", "")
        text = answer if answer in self.logprobs else answer[:1]
        score = self.logprobs.get(answer, -9.0) if config.logprobs else 0.0
        return SimpleNamespace(texts=[text], scores=[score])


def test_openvino_engine_scores_by_two_forced_one_token_generations() -> None:
    openvino_genai = pytest.importorskip("openvino_genai")
    from dualview.synth.backends.openvino_engine import OpenVINOEngine

    engine = OpenVINOEngine.__new__(OpenVINOEngine)
    engine._ov, engine._pipe = openvino_genai, FakePipe()
    engine._tokenizer = SimpleNamespace(
        apply_chat_template=lambda messages, add_generation_prompt: "<chat>",
        encode=lambda text, add_special_tokens: SimpleNamespace(
            input_ids=SimpleNamespace(shape=(1, len(text)))
        ),
    )
    scored = engine.score_answers([{"role": "user", "content": "q"}], "<answer>", ("yes", "no"))
    assert scored.logodds == pytest.approx(-0.4 + 1.3)
    assert scored.tokens_in == len("<chat><answer>")
    regexes = [c.structured_output_config.regex for c in engine._pipe.configs]
    assert regexes == ["yes", "no"]
    assert all(
        c.max_new_tokens == 1 and c.logprobs and not c.do_sample for c in engine._pipe.configs
    )
    with pytest.raises(DualviewError, match="'maybe' is not one token"):
        engine.score_answers([{"role": "user", "content": "q"}], "", ("maybe", "no"))
