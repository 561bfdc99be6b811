"""The pairwise judge (``verify.scoring: pairwise``, issue 36 item 2): the judge sees P+ and
N* side by side and its preference is the log-odds of ``1`` against ``2``, averaged over
both orders of the two passages, so a preference for a position cancels. Scripted scorers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from dualview.synth.task import LLM
from dualview.synth.verify import VerifyConfig, VerifyTask
from tests.test_synth_logodds import (
    TOPIC_ONLY,
    ScriptedScorer,
    a_pair,
    instance_of,
    judge_bench,
    task_params,
)
from tests.test_synth_pointwise import gold_dir  # noqa: F401  (fixture)

POSITION_BIAS = 5.0  # the scripted judge's extra log-odds for whatever is passage 1


def scripted_preference(prompt: str) -> float:
    """log p(1) - log p(2): +1 when passage 1 is the one the instruction asks for (P+ under
    the original, N* under the reversal; P+ always for `TOPIC_ONLY`), -1 when passage 2 is,
    plus `POSITION_BIAS`, so a judge that read one order only would always answer 1."""
    inst = instance_of(prompt)
    instruction = re.search(r"Instruction: (.*)", prompt).group(1).strip()
    first = re.search(r"Passage 1: (.*)", prompt).group(1).strip()
    wanted = inst.positive.text
    if inst.instance not in TOPIC_ONLY and instruction != inst.instruction:
        wanted = inst.n_star.text
    return POSITION_BIAS + (1.0 if first == wanted else -1.0)


def pair_scorer() -> ScriptedScorer:
    return ScriptedScorer(scripted_preference)


def test_the_pairwise_judge_compares_p_plus_and_n_star_in_both_orders(
    gold_dir: Path,  # noqa: F811
) -> None:
    scorer = pair_scorer()
    task = VerifyTask(VerifyConfig(scoring="pairwise", distractors=0))
    llm = LLM(scorer, task_params())
    right = llm.stamp(asyncio.run(task.run(a_pair(gold_dir, "alpha-001"), llm)))
    # The position bias (+5 for passage 1) would make one order pick P+ under both
    # instructions; averaged over both orders it cancels and both scenarios pass.
    assert right.status == "ok"
    assert right.counts["passed_orig"] == right.counts["passed_dv"] == 1
    # Two scenarios, one rival each, two orders: 4 distinct prompts, each showing both passages.
    inst = instance_of(scorer.asked[0][0])
    assert len(scorer.asked) == len({p for p, _, _ in scorer.asked}) == 2 * 2
    assert {(prefix, answers) for _, prefix, answers in scorer.asked} == {("<answer>", ("1", "2"))}
    firsts = [re.search(r"Passage 1: (.*)", p).group(1).strip() for p, _, _ in scorer.asked]
    assert sorted(firsts) == sorted([inst.positive.text, inst.n_star.text] * 2)
    # A judge that prefers P+ whatever the instruction fails the reversal, with its preference.
    topic = asyncio.run(task.run(a_pair(gold_dir, "beta-001"), LLM(scorer, task_params())))
    assert topic.status == "rejected" and topic.counts["passed_orig"] == 1
    assert "passed_dv" not in topic.counts
    assert re.fullmatch(
        r"dv: \S+ preferred to the intended \S+ \(preference for the intended -1\.000\)",
        topic.reason,
    )
    # The raw answers are the scores as text: a re-judged unit replays them, asking nothing.
    replay = pair_scorer()
    again = asyncio.run(
        task.run(a_pair(gold_dir, "alpha-001"), LLM(replay, task_params(), replay=right.raw))
    )
    assert again.status == "ok" and replay.asked == []


def test_pairwise_has_its_own_template_and_cache_key() -> None:
    pairwise = VerifyTask(VerifyConfig(scoring="pairwise")).fingerprint()
    logodds = VerifyTask(VerifyConfig(scoring="logodds")).fingerprint()
    assert pairwise["config"]["scoring"] == "pairwise"
    assert pairwise["template"] != logodds["template"]


def test_bench_checks_the_pairwise_judge_on_the_gold_pairs(
    tmp_path: Path,
    gold_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge, table = judge_bench(pair_scorer(), "pairwise", tmp_path / "o", gold_dir, monkeypatch)
    assert judge["scoring"] == "pairwise"
    positive, negative = judge["gold_positive"], judge["gold_negative"]
    assert (positive["correct"], positive["n"]) == (5, 6)  # beta-001's reversal lost
    assert (negative["correct"], negative["n"]) == (6, 6)
    assert positive["seconds_per_record"] == pytest.approx(4 * 0.5)  # 4 prompts a pair
    assert "| judge check (log-odds of passage 1 against 2, both orders) |" in table
    assert "| N* outscores P+ under the gold reversal | 6 | 83% [44, 97] |" in table
