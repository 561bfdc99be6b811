"""Verification by multiple choice: does an LLM judge pick the intended passage?

A unit is a record plus every record of the input that belongs to it, wherever it stands
(`group_units`): an ``orig`` with its dual view (the ``dv`` whose ``parent_id`` names it,
paired by the one rule of `dualview.data.pairing`), or an InF-IR tuple (records whose
``meta.infir_parent`` names it); any other record is a unit alone. Every record of the unit is
one *scenario*: its instruction and query, with the candidates (all the unit's positives and
instruction negatives, plus a few random distractors, shuffled with a seed), and the record's
positive as the intended answer. A dual-view record that arrives alone
carries its original instruction in ``meta`` (written by ``reverse``) and adds the scenario
"original instruction -> original positive". A unit is kept only when every scenario picks its
intended passage; swap accuracy is the kept share of units with two or more scenarios.

Ways to judge (``VerifyConfig.scoring``):

- ``choice`` (the default): one call per scenario shows the numbered candidates and asks for
  the index of the best one. Small models answer with a position (``[1]``) whatever the text.
- ``pointwise``: each candidate passage is judged alone, yes or no, in both orders of the two
  texts (the request before the passage, then the passage before the request); a passage is
  a *yes* only when both orders say yes. A scenario passes when its intended passage is a
  yes and every other candidate a no, so no verdict depends on where a passage stands. The
  unit's counts say how the judge did on the intended passages (``pw_intended_*``) and on
  the passages other scenarios intend (``pw_rival_*``, e.g. N* under the original
  instruction: the original-as-reversal control), per role, which `dualview.synth.bench`
  turns into the judge's balanced accuracy.

- ``logodds``: each candidate passage gets a score, the judge's log-odds of ``yes`` against
  ``no`` as its reply's first word (the pointwise prompt with the reply opened as
  ``<answer>``: one prompt pass, no generation; `dualview.synth.task.LLM.logodds`), the mean
  over both orders of the two texts. A scenario passes when its intended passage outscores
  every other candidate under the scenario's instruction (under the original P+ must outscore
  N*, under the reversal N* must outscore P+), so there is neither a position bias nor a
  threshold: a judge that scores by topic alone gets one of the two scenarios right. The
  unit's counts are the scenarios' passes (``passed_<role>`` of ``judged_<role>``).

- ``pairwise``: the judge sees two candidate passages side by side under the scenario's
  instruction and its preference is the log-odds of ``1`` against ``2`` as its reply's first
  word (one prompt pass each), the mean over both orders of the two passages (the intended
  one first, then second, its sign turned), so a preference for a position cancels out. A
  scenario passes when its intended passage is preferred to every other candidate; counts as
  for ``logodds``. Against ``logodds`` the judge compares the two passages it must tell
  apart instead of scoring each against an absolute "yes", at the same number of prompt
  tokens per gold pair (4 prompts of two passages against 8 of one).

``constrained: true`` makes the engine follow the reply format (a regular expression; see
`dualview.synth.backends.base.SamplingParams.regex`), so no judgement is unparsable.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from dualview.config import StrictModel
from dualview.data.jsonl import iter_records
from dualview.data.pairing import ExtraDvError, Pairing, pair_views
from dualview.data.schema import Document, Record
from dualview.synth.parsing import Parsed, accept, normalize, reject, screen, the_answer
from dualview.synth.task import LLM, Outcome, TemplateTask, truncate
from dualview.synth.templates import load_template

_CHOICE = re.compile(r"\[?\s*([0-9]{1,3})\s*\]?")
_YES_NO = {"yes": True, "no": False}
# The reply formats as regular expressions, for constrained output.
YES_NO_REGEX = r"<answer>(yes|no)</answer>"
# The log-odds judge: the reply's start, and the answers whose log-odds is a passage's score.
ANSWER_PREFIX = "<answer>"
YES_NO_ANSWERS = ("yes", "no")
# The pairwise judge: the answers whose log-odds is the preference for the first passage.
FIRST_SECOND_ANSWERS = ("1", "2")
# The prompt template of each way to judge.
TEMPLATES = {
    "choice": "verify",
    "pointwise": "verify_pointwise",
    "logodds": "verify_pointwise",
    "pairwise": "verify_pairwise",
}


def choice_regex(n_choices: int) -> str:
    """The reply ``<answer>[k]</answer>`` with k in 1..n_choices, as a regular expression."""
    return r"<answer>\[(" + "|".join(str(k) for k in range(1, n_choices + 1)) + r")\]</answer>"


class VerifyConfig(StrictModel):
    """Settings of the ``verify`` task; part of the cache key."""

    distractors: int = 3
    # Records whose documents serve as random distractors; default: the unit's hard negatives.
    distractor_file: Path | None = None
    seed: int = 0
    template: Path | None = None
    max_passage_chars: int = 1000
    # How the judge decides (see the module docstring): pick an index among the candidates,
    # a yes/no per passage in both orders (no position bias by construction), or the log-odds
    # of yes per passage in both orders, compared between the passages (no threshold either),
    # or the preference between two passages shown together, in both orders.
    scoring: Literal["choice", "pointwise", "logodds", "pairwise"] = "choice"
    # Constrain the judge's reply to its format (engines that support it).
    constrained: bool = False

    # Options that enter the cache key only when set (`dualview.synth.task.config_key`).
    keyed_when_set: ClassVar[tuple[str, ...]] = ("scoring", "constrained")


@dataclass(frozen=True)
class Scenario:
    """One judgement: under (instruction, query) the passage ``intended`` should win."""

    role: str
    instruction: str
    query: str
    intended: str  # document id


def parse_choice(text: str, n_choices: int) -> Parsed[int]:
    """The 1-based passage number from ``<answer>[k]</answer>`` (or a reply that is nothing but
    ``[k]``, which small models give), or a rejection."""
    screened = screen(text)
    if not screened.ok:
        return screened
    bare = _CHOICE.fullmatch(text.strip())
    answer = accept(text.strip()) if bare else the_answer(text)
    if not answer.ok:
        return answer
    match = _CHOICE.fullmatch((answer.value or "").strip())
    if match is None:
        return reject("malformed", "the answer is not a passage number")
    choice = int(match.group(1))
    if not 1 <= choice <= n_choices:
        return reject("out_of_range", f"passage {choice} does not exist (1..{n_choices})")
    return accept(choice)


def parse_yes_no(text: str) -> Parsed[bool]:
    """True/False from ``<answer>yes</answer>`` / ``<answer>no</answer>`` (or a bare yes/no,
    any case), or a rejection."""
    screened = screen(text)
    if not screened.ok:
        return screened
    bare = normalize(text)
    answer = accept(bare) if bare in _YES_NO else the_answer(text)
    if not answer.ok:
        return Parsed(answer.status, None, answer.reason)
    verdict = _YES_NO.get(normalize(answer.value or ""))
    if verdict is None:
        return reject("malformed", "the answer is not yes or no")
    return accept(verdict)


def _extra_dv_error(pairing: Pairing[Record]) -> ExtraDvError:
    """The error for the first dv set aside: an orig has one dv record."""
    extra = pairing.extra[0]
    kept = pairing.dv_of[str(extra.parent_id)]
    return ExtraDvError(
        f"two dv records for orig {extra.parent_id!r}: id {kept.id!r} and id {extra.id!r}; "
        "keep one (`dualview mix --extra-dv` and experiments' extra_dv choose for mixes and "
        "the pipeline)"
    )


def _heads(records: list[Record]) -> list[int]:
    """For each record, the position of the record that heads its unit (its own when it
    heads one): a dv's is the orig it is paired with, an InF-IR record's its
    ``meta.infir_parent``, when that record heads a unit itself."""
    pairing = pair_views(records, "first")
    if pairing.extra:
        raise _extra_dv_error(pairing)
    position = {id(r): i for i, r in enumerate(records)}
    first: dict[str, int] = {}
    for i, record in enumerate(records):
        first.setdefault(record.id, i)
    parent = {position[id(dv)]: position[id(orig)] for orig, dv in pairing.pairs}
    for i, record in enumerate(records):
        named = first.get(str(record.meta.get("infir_parent")), i)
        if i not in parent and named != i:
            parent[i] = named
    return [
        parent[i] if i in parent and parent[i] not in parent else i for i in range(len(records))
    ]


def group_units(records: Iterable[Record]) -> Iterator[list[Record]]:
    """The verification units of ``records`` (see the module docstring), whatever the order
    of the input: each orig then its dv, all origs then all dvs, or a dv before its orig.
    A unit holds its head first, then its other records in input order; units come in the
    order of their heads.

    An orig has one dv record (`dualview.data.pairing`'s rule): a second dv of the same
    orig is an `ExtraDvError` naming both, never a unit judged with two reversals.
    """
    records = list(records)
    heads = _heads(records)
    units = {i: [records[i]] for i, head in enumerate(heads) if head == i}
    for i, head in enumerate(heads):
        if head != i:
            units[head].append(records[i])
    yield from units.values()


def scenarios(unit: list[Record]) -> list[Scenario]:
    """The judgements a unit must pass (see module docstring)."""
    found = [
        Scenario(str(r.meta.get("infir_role") or r.view), r.instruction, r.query, r.positives[0].id)
        for r in unit
    ]
    head = unit[0]
    if len(unit) == 1 and head.view == "dv" and "orig_instruction" in head.meta:
        original = str(head.meta.get("orig_positive_id") or "")
        if any(d.id == original for d in head.instruction_negatives):
            found.append(Scenario("orig", str(head.meta["orig_instruction"]), head.query, original))
    return found


def candidates(unit: list[Record]) -> list[Document]:
    """The unit's positives and instruction negatives, each once."""
    seen: dict[str, Document] = {}
    for record in unit:
        for doc in [*record.positives, *record.instruction_negatives]:
            seen.setdefault(doc.id, doc)
    return list(seen.values())


def load_distractor_pool(path: Path) -> list[Document]:
    """Every distinct document of a record file, in file order."""
    pool: dict[str, Document] = {}
    for record in iter_records(path):
        for doc in record.documents():
            pool.setdefault(doc.id, doc)
    return list(pool.values())


class VerifyTask(TemplateTask):
    """The runner task for multiple-choice verification (kept = ``ok``, dropped = ``rejected``)."""

    name = "verify"

    def __init__(self, config: VerifyConfig | None = None) -> None:
        self.config = config or VerifyConfig()
        self.template = load_template(TEMPLATES[self.config.scoring], self.config.template)
        self.pool = (
            load_distractor_pool(self.config.distractor_file) if self.config.distractor_file else []
        )

    def units(self, records: Iterable[Record]) -> Iterator[list[Record]]:
        return group_units(records)

    def _choices(self, unit: list[Record], index: int) -> list[Document]:
        rng = random.Random(f"{self.config.seed}:{unit[0].id}:{index}")
        chosen = candidates(unit)
        taken = {d.id for d in chosen}
        source = self.pool or [d for r in unit for d in r.hard_negatives]
        spare = [d for d in source if d.id not in taken]
        spare = list({d.id: d for d in spare}.values())
        chosen += rng.sample(spare, min(self.config.distractors, len(spare)))
        rng.shuffle(chosen)
        return chosen

    async def _judge(self, unit: list[Record], index: int, scenario: Scenario, llm: LLM) -> str:
        """'' when the judge picks the intended passage, else why not."""
        choices = self._choices(unit, index)
        prompt = self.template.render(
            query=scenario.query,
            instruction=scenario.instruction,
            passages=[truncate(d.text, self.config.max_passage_chars) for d in choices],
        )
        regex = choice_regex(len(choices)) if self.config.constrained else None
        parsed = parse_choice(await llm.ask(prompt, regex), len(choices))
        if not parsed.ok:
            return f"{scenario.role}: unparsable judgement ({parsed.reason})"
        picked = choices[(parsed.value or 1) - 1].id
        if picked != scenario.intended:
            return f"{scenario.role}: judge picked {picked}, intended {scenario.intended}"
        return ""

    def _pointwise_prompts(self, scenario: Scenario, doc: Document) -> list[str]:
        """The prompts that ask about ``doc`` alone under ``scenario``: the passage after the
        query and instruction, then before them (a position bias cancels out)."""
        return [
            self.template.render(
                query=scenario.query,
                instruction=scenario.instruction,
                passage=truncate(doc.text, self.config.max_passage_chars),
                passage_first=passage_first,
            )
            for passage_first in (False, True)
        ]

    async def _says_yes(
        self, scenario: Scenario, doc: Document, llm: LLM, asked: dict[str, Parsed[bool]]
    ) -> tuple[bool, int]:
        """Whether the judge says yes to ``doc`` under ``scenario`` in both orders, and how
        many of the two answers were unparsable (an unparsable answer counts as no).
        ``asked`` remembers answers by prompt, so a prompt two scenarios share is asked once."""
        verdicts = []
        for prompt in self._pointwise_prompts(scenario, doc):
            if prompt not in asked:
                regex = YES_NO_REGEX if self.config.constrained else None
                asked[prompt] = parse_yes_no(await llm.ask(prompt, regex))
            verdicts.append(asked[prompt])
        unparsable = sum(not v.ok for v in verdicts)
        return all(v.value is True for v in verdicts), unparsable

    async def _judge_pointwise(
        self,
        unit: list[Record],
        index: int,
        todo: list[Scenario],
        llm: LLM,
        counts: Counter[str],
        asked: dict[str, Parsed[bool]],
    ) -> str:
        """'' when the judge says yes to the intended passage and no to every other
        candidate, each passage judged alone (see the module docstring); else why not."""
        scenario = todo[index]
        rivals = {s.intended for s in todo} - {scenario.intended}
        problems = []
        for doc in sorted(self._choices(unit, index), key=lambda d: d.id):
            yes, unparsable = await self._says_yes(scenario, doc, llm, asked)
            counts["unparsable"] += unparsable
            kind = "intended" if doc.id == scenario.intended else ""
            kind = kind or ("rival" if doc.id in rivals else "")
            if kind:
                counts[f"pw_{kind}_{scenario.role}"] += 1
                counts[f"pw_{kind}_yes_{scenario.role}"] += int(yes)
            if yes != (doc.id == scenario.intended):
                problems.append(f"judge said {'yes' if yes else 'no'} to {doc.id}")
        if not problems:
            return ""
        return f"{scenario.role}: {', '.join(problems)} (intended {scenario.intended})"

    async def _score(
        self, scenario: Scenario, doc: Document, llm: LLM, scored: dict[str, float]
    ) -> float:
        """The judge's log-odds of yes for ``doc`` under ``scenario``, the mean over both
        orders of the two texts; ``scored`` remembers scores by prompt (shared prompts are
        scored once)."""
        margins = []
        for prompt in self._pointwise_prompts(scenario, doc):
            if prompt not in scored:
                scored[prompt] = await llm.logodds(prompt, ANSWER_PREFIX, YES_NO_ANSWERS)
            margins.append(scored[prompt])
        return sum(margins) / len(margins)

    async def _judge_logodds(
        self, unit: list[Record], index: int, scenario: Scenario, llm: LLM, scored: dict[str, float]
    ) -> str:
        """'' when the intended passage outscores every other candidate (see the module
        docstring), else the best rival with both scores."""
        scores = {
            doc.id: await self._score(scenario, doc, llm, scored)
            for doc in sorted(self._choices(unit, index), key=lambda d: d.id)
        }
        mine = scores.pop(scenario.intended)
        if not scores:
            return ""
        rival = max(scores, key=lambda doc_id: scores[doc_id])
        if mine > scores[rival]:
            return ""
        return (
            f"{scenario.role}: {rival} outscored the intended {scenario.intended} "
            f"(log-odds {scores[rival]:.3f} vs {mine:.3f})"
        )

    async def _preference(
        self,
        scenario: Scenario,
        pair: tuple[Document, Document],
        llm: LLM,
        scored: dict[str, float],
    ) -> float:
        """How much the judge prefers ``pair[0]`` to ``pair[1]`` under ``scenario``: the
        log-odds of ``1`` against ``2`` with ``pair[0]`` shown first, and minus that with it
        shown second, averaged (a preference for a position cancels out); ``scored``
        remembers scores by prompt."""
        margins = []
        for sign, (first, second) in ((1.0, pair), (-1.0, pair[::-1])):
            prompt = self.template.render(
                query=scenario.query,
                instruction=scenario.instruction,
                first=truncate(first.text, self.config.max_passage_chars),
                second=truncate(second.text, self.config.max_passage_chars),
            )
            if prompt not in scored:
                scored[prompt] = await llm.logodds(prompt, ANSWER_PREFIX, FIRST_SECOND_ANSWERS)
            margins.append(sign * scored[prompt])
        return sum(margins) / len(margins)

    async def _judge_pairwise(
        self, unit: list[Record], index: int, scenario: Scenario, llm: LLM, scored: dict[str, float]
    ) -> str:
        """'' when the judge prefers the intended passage to every other candidate, each
        compared with it in both orders (see the module docstring); else the rival it
        preferred most, with the preference."""
        choices = sorted(self._choices(unit, index), key=lambda d: d.id)
        intended = next(d for d in choices if d.id == scenario.intended)
        worst: tuple[float, str] | None = None
        for rival in choices:
            if rival.id == scenario.intended:
                continue
            preference = await self._preference(scenario, (intended, rival), llm, scored)
            if preference <= 0 and (worst is None or preference < worst[0]):
                worst = (preference, rival.id)
        if worst is None:
            return ""
        return (
            f"{scenario.role}: {worst[1]} preferred to the intended {scenario.intended} "
            f"(preference for the intended {worst[0]:.3f})"
        )

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        todo = scenarios(unit)
        counts: Counter[str] = Counter()
        asked: dict[str, Parsed[bool]] = {}
        scored: dict[str, float] = {}
        failures = []
        for index, scenario in enumerate(todo):
            if self.config.scoring == "pointwise":
                problem = await self._judge_pointwise(unit, index, todo, llm, counts, asked)
            elif self.config.scoring == "logodds":
                problem = await self._judge_logodds(unit, index, scenario, llm, scored)
            elif self.config.scoring == "pairwise":
                problem = await self._judge_pairwise(unit, index, scenario, llm, scored)
            else:
                problem = await self._judge(unit, index, scenario, llm)
                counts["unparsable"] += int("unparsable" in problem)
            counts[f"judged_{scenario.role}"] += 1
            if problem:
                failures.append(problem)
            else:
                counts[f"passed_{scenario.role}"] += 1
        passed = not failures
        records = [r.to_json_dict() for r in unit] if passed else []
        status = "ok" if passed else "rejected"
        kept = {k: v for k, v in counts.items() if v}  # zero counts left out, as before
        kept["units_paired"] = int(len(todo) >= 2)
        kept["units_paired_passed"] = int(passed and len(todo) >= 2)
        return Outcome(status, records=records, reason="; ".join(failures), counts=kept)

    def summary(self, counts: dict[str, int]) -> dict[str, Any]:
        """Swap accuracy over paired units and the pass rate of every scenario role."""
        paired = counts.get("units_paired", 0)
        roles = sorted(k.removeprefix("judged_") for k in counts if k.startswith("judged_"))
        return {
            "swap_accuracy": counts.get("units_paired_passed", 0) / paired if paired else None,
            "paired_units": paired,
            "scenario_accuracy": {
                role: counts.get(f"passed_{role}", 0) / counts[f"judged_{role}"] for role in roles
            },
        }
