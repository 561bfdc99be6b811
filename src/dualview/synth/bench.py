"""Synthesis-quality benchmark on the gold set (``dualview bench-synth``).

How good is an LLM at polarity reversal, and how good is its judge? The hand-written gold set
(`dualview.data.gold`) gives trusted answers for both questions:

1. **Reversal**, once per few-shot setting (``shots``): every selected gold ``orig`` record
   is reversed with N* = the gold N* (``ReverseConfig.n_star = "meta"``), so the LLM's
   reversal is comparable with the gold one. Few-shot examples are gold instances of *other
   domains* of the same split, chosen deterministically with ``seed``: the instance being
   reversed is never among its own examples. Reported: parse rate (the answer followed the
   format), None rate, accepted rate and the count of every rejection reason.
2. **Verification of the produced reversals** with the judge backend: a reversal passes when
   the judge picks N* under the new instruction and P+ under the original one.
3. **The judge against the gold labels**: on the gold pairs (orig + gold dv; both scenarios
   must be won: *gold-positive* accuracy) and on a negative control, the original instruction
   presented as if it were the reversal (a lone dv record whose instruction is the original
   one and whose positive is N*; the judge must *not* pick N*: *gold-negative* accuracy, an
   unparsable judgement counts as wrong).

With ``judge: false`` (``--no-judge``) only step 1 runs (writer only): no judge call at
all, and the report says "not judged" where a judge's numbers would be.

Every step is a `dualview.synth.runner.Runner` run with its cache in ``OUT``, so an
interrupted benchmark continues where it stopped when run again with the same settings.
Results: ``OUT/bench.json`` and ``OUT/bench.md``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

from pydantic import Field, SerializeAsAny

from dualview.config import StrictModel
from dualview.data.gold import GOLD_DIR, load_gold, split_path
from dualview.data.gold_check import char_ratio
from dualview.data.gold_pairs import GoldPair, gold_pairs, negative_control
from dualview.data.jsonl import iter_records
from dualview.data.schema import Record
from dualview.errors import ConfigError, DataError
from dualview.io.atomic import atomic_write_text, write_jsonl
from dualview.io.files import iter_json_lines
from dualview.proportions import wilson_interval
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.job_stats import JobStats
from dualview.synth.reverse import ReverseConfig, ReverseExample, ReverseTask
from dualview.synth.runner import RunnerConfig, make_runner, side_path
from dualview.synth.task import LLM, Outcome, Task, one_per_record, truncate
from dualview.synth.verify import VerifyConfig, VerifyTask

# Rejection reasons that mean the answer did not follow the reply format at all.
FORMAT_FAILURES = ("no_answer", "multiple_answers", "malformed")
#: Judges that compare scores of the key passages (no verdict per passage), each with how
#: its table names the comparison.
COMPARING_JUDGES = {
    "logodds": "log-odds of yes per passage, both orders, compared",
    "pairwise": "log-odds of passage 1 against 2, both orders",
}


class BenchConfig(StrictModel):
    """Settings of one benchmark; everything that changes answers is in the runners' keys."""

    # SerializeAsAny: a dump (bench.json's config) holds the settings of each backend's kind
    backend: SerializeAsAny[BackendConfig] = Field(default_factory=BackendConfig)
    # The judge; None = the synthesis backend.
    judge_backend: SerializeAsAny[BackendConfig] | None = None
    sampling: SamplingParams = SamplingParams(max_tokens=160)
    judge_sampling: SamplingParams = SamplingParams(max_tokens=16)
    runner: RunnerConfig = RunnerConfig(concurrency=4)
    split: Literal["train", "test"] = "train"
    # Folder with the built gold splits; None = the set shipped in the package.
    gold_dir: Path | None = None
    # Gold instances to reverse (taken round-robin over domains); None = all of the split.
    limit: int | None = Field(default=None, ge=1)
    shots: list[int] = Field(default_factory=lambda: [0, 1])
    seed: int = 0
    # Passages of few-shot examples are cut to this many characters (prompt length).
    example_passage_chars: int = Field(default=600, ge=50)
    # An accepted reversal this similar to the original (difflib ratio) is a near-copy.
    near_copy_ratio: float = Field(default=0.8, gt=0, le=1)
    # Reversal settings (``examples`` and ``n_star`` are set by the benchmark).
    reverse: ReverseConfig = ReverseConfig()
    verify: VerifyConfig = VerifyConfig()
    # Self-consistency: reversal candidates per instance. The first is answered with
    # ``sampling`` (greedy by default; its row is the plain setting), the others are sampled
    # at ``sample_temperature`` with seeds ``sampling.seed + i``; an instance is accepted when
    # the judge verifies one of its candidates, and the first verified one is kept.
    samples: int = Field(default=1, ge=1)

    sample_temperature: float = Field(default=0.7, gt=0, allow_inf_nan=False)
    # Only check the judge against the gold labels (no reversal is written): ``shots`` unused.
    judge_only: bool = False
    # False = writer only: neither the judge's gold check nor its verdicts on the reversals
    # run (no judge call); the report says "not judged" and has no pass rate.
    judge: bool = True
    # The judge's verdicts on the reversals count only when its balanced accuracy on the gold
    # check reaches this at the lower end of its Wilson 95% interval (the report says).
    trust_balanced_accuracy: float = Field(default=0.75, ge=0, le=1)


def _domain(record: Record) -> str:
    return str(record.meta.get("domain") or "")


def _rank(*parts: object) -> str:
    """A deterministic pseudo-random sort key."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


def key_passages(pair: GoldPair) -> GoldPair:
    """The pair with only its two key passages, P+ and N*, as candidates: what the pointwise
    judge's gold check needs (each other candidate would cost four more calls)."""
    orig, dv = pair
    n_star, p_plus = dv.positives[0], orig.positives[0]
    return (
        orig.model_copy(update={"instruction_negatives": [n_star]}),
        dv.model_copy(update={"instruction_negatives": [p_plus]}),
    )


def select_pairs(pairs: list[GoldPair], limit: int | None) -> list[GoldPair]:
    """The first ``limit`` pairs taken round-robin over the domains (sorted by name), so that a
    small benchmark still covers every domain; all pairs when ``limit`` is None."""
    by_domain: dict[str, list[GoldPair]] = defaultdict(list)
    for pair in pairs:
        by_domain[_domain(pair[0])].append(pair)
    queues = [by_domain[d] for d in sorted(by_domain)]
    chosen: list[GoldPair] = []
    for depth in range(max((len(q) for q in queues), default=0)):
        chosen.extend(q[depth] for q in queues if depth < len(q))
    return chosen[:limit] if limit is not None else chosen


def example_from_pair(pair: GoldPair, max_chars: int) -> ReverseExample:
    """A worked reversal example from a gold pair: the gold dv instruction is the answer."""
    orig, dv = pair
    n_star = dv.positives[0]
    return ReverseExample(
        query=orig.query,
        instruction=orig.instruction,
        positive=truncate(orig.positives[0].text, max_chars),
        target=truncate(n_star.text, max_chars),
        others=[
            truncate(d.text, max_chars) for d in orig.instruction_negatives if d.id != n_star.id
        ],
        new_instruction=dv.instruction,
    )


def pick_examples(pool: list[GoldPair], domain: str, shots: int, seed: int) -> list[GoldPair]:
    """``shots`` pool pairs from domains other than ``domain``: a seeded order, one pair per
    domain before any domain is used twice. Deterministic in (pool, domain, shots, seed)."""
    if shots == 0:
        return []
    others = sorted(
        (p for p in pool if _domain(p[0]) != domain),
        key=lambda p: _rank("bench-shots", seed, domain, p[0].id),
    )
    if len(others) < shots:
        raise ConfigError(f"{shots} shot(s) need {shots} gold pairs outside domain {domain!r}")
    first: dict[str, GoldPair] = {}
    for pair in others:
        first.setdefault(_domain(pair[0]), pair)
    spread = list(first.values())
    taken = {p[0].id for p in spread}
    return (spread + [p for p in others if p[0].id not in taken])[:shots]


class GoldFewShotReverse:
    """The reverse task with per-domain few-shot examples drawn from the gold set.

    One `ReverseTask` per domain of the pool, each with examples from other domains;
    a record goes to the task of its ``meta.domain``. N* is the gold N* (``n_star: meta``).
    """

    name = "reverse"

    def __init__(self, pool: list[GoldPair], shots: int, config: BenchConfig | None = None) -> None:
        config = config or BenchConfig()
        self.examples: dict[str, list[GoldPair]] = {}
        self.tasks: dict[str, ReverseTask] = {}
        for domain in sorted({_domain(p[0]) for p in pool}):
            chosen = pick_examples(pool, domain, shots, config.seed)
            examples = [example_from_pair(p, config.example_passage_chars) for p in chosen]
            reverse = config.reverse.model_copy(update={"examples": examples, "n_star": "meta"})
            self.examples[domain] = chosen
            self.tasks[domain] = ReverseTask(ReverseConfig.model_validate(reverse.model_dump()))

    def examples_for(self, record: Record) -> list[GoldPair]:
        """The gold pairs shown as examples when ``record`` is reversed."""
        return self.examples.get(_domain(record), [])

    def fingerprint(self) -> dict[str, Any]:
        return {"by_domain": {d: t.fingerprint() for d, t in self.tasks.items()}}

    def earlier_fingerprints(self) -> list[dict[str, Any]]:
        """The fingerprints under the reverse task's older parsers (see ``Task``), so a
        parser change re-judges a benchmark's cached answers instead of asking again."""
        earlier = {d: t.earlier_fingerprints() for d, t in self.tasks.items()}
        versions = min((len(e) for e in earlier.values()), default=0)
        return [{"by_domain": {d: e[i] for d, e in earlier.items()}} for i in range(versions)]

    def units(self, records: Iterable[Record]) -> Iterator[list[Record]]:
        return one_per_record(records)

    def summary(self, counts: dict[str, int]) -> dict[str, Any]:
        return {}

    async def run(self, unit: list[Record], llm: LLM) -> Outcome:
        task = self.tasks.get(_domain(unit[0]))
        if task is None:
            return Outcome("skipped", reason=f"no examples for domain {_domain(unit[0])!r}")
        return await task.run(unit, llm)


def closeness(produced: list[Record], gold: dict[str, str], near_copy: float) -> dict[str, Any]:
    """How close accepted reversals are to the original instruction and to the gold reversal
    (difflib ratio of normalized texts); near-copies of the original are counted."""
    to_orig = [char_ratio(str(r.meta.get("orig_instruction", "")), r.instruction) for r in produced]
    to_gold = [char_ratio(gold.get(r.parent_id or "", ""), r.instruction) for r in produced]
    return {
        "accepted": len(produced),
        "near_copies_of_original": sum(x >= near_copy for x in to_orig),
        "mean_ratio_to_original": round(fmean(to_orig), 4) if to_orig else None,
        "mean_ratio_to_gold": round(fmean(to_gold), 4) if to_gold else None,
    }


def failed_answers(out: Path, top: int = 5) -> dict[str, int]:
    """The most common raw LLM answers of the units a run dropped (e.g. a judge that always
    answers a bare ``[1]``), each cut to 60 characters."""
    answers: Counter[str] = Counter()
    dropped = side_path(out, "dropped.jsonl")
    for _, row in iter_json_lines(dropped) if dropped.exists() else []:
        answers.update(" ".join(str(a).split())[:60] for a in row.get("raw") or [])
    return dict(answers.most_common(top))


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 4) if den else None


def cost(stats: JobStats) -> dict[str, Any]:
    """LLM seconds and tokens per unit (summed latencies, so resumed runs count right)."""
    units = stats.units
    return {
        "llm_calls": stats.llm_calls,
        "seconds_per_record": _ratio(_llm_seconds(stats), units),
        "tokens_in_per_record": _ratio(stats.tokens_in, units),
        "tokens_out_per_record": _ratio(stats.tokens_out, units),
        "wall_s_this_run": stats.wall_s,
    }


def _llm_seconds(stats: JobStats) -> float:
    """Summed LLM latency of a run (mean x calls, as `cost` counts it)."""
    return (stats.latency_s.mean or 0.0) * stats.llm_calls


def reverse_metrics(stats: JobStats) -> dict[str, Any]:
    """Parse, None and accepted rates over the answered units, and rejections by reason (the
    runner's count in ``stats``)."""
    outcomes = stats.outcomes
    reasons = Counter(stats.rejections)
    answered = stats.units - outcomes.skipped - outcomes.error
    unparsed = sum(reasons[code] for code in FORMAT_FAILURES)
    return {
        "records": stats.units,
        "answered": answered,
        "outcomes": dict(outcomes.items()),
        "parse_rate": _ratio(answered - unparsed, answered),
        "none_rate": _ratio(outcomes.impossible, answered),
        "accepted_rate": _ratio(outcomes.ok, answered),
        "rejection_reasons": dict(sorted(reasons.items())),
        **cost(stats),
    }


def judge_metrics(stats: JobStats, out: Path, expect_pass: bool) -> dict[str, Any]:
    """Judge accuracy on units whose right verdict is known: pass (gold) or fail (control)."""
    units = stats.units
    passed = stats.outcomes.ok
    unparsable_units = _unparsable_units(stats)
    correct = passed if expect_pass else units - passed - unparsable_units
    return {
        "units": units,
        "passed": passed,
        "unparsable_judgements": stats.counts.get("unparsable", 0),
        "accuracy": _ratio(correct, units),
        "scenario_accuracy": stats.summary.get("scenario_accuracy", {}),
        "failed_unit_answers": failed_answers(out),
        **cost(stats),
    }


def proportion(successes: int, n: int) -> dict[str, Any]:
    """``successes`` of ``n`` with its share and Wilson 95% interval."""
    ci = [round(x, 4) for x in wilson_interval(successes, n)] if n else None
    return {"correct": successes, "n": n, "accuracy": _ratio(successes, n), "ci95": ci}


def balanced(positive: dict[str, Any], negative: dict[str, Any]) -> dict[str, Any]:
    """Balanced accuracy of the two checks with a Wilson 95% interval: the mean of the two
    accuracies, which is one proportion (correct of both) when the checks are equally big;
    otherwise the interval is left out."""
    accs = [positive["accuracy"], negative["accuracy"]]
    if None in accs:
        return {"balanced_accuracy": None, "balanced_ci95": None}
    n_pos, n_neg = positive["units"], negative["units"]
    if n_pos != n_neg:
        return {"balanced_accuracy": round(sum(accs) / 2, 4), "balanced_ci95": None}
    both = proportion(round(accs[0] * n_pos) + round(accs[1] * n_neg), n_pos + n_neg)
    return {"balanced_accuracy": both["accuracy"], "balanced_ci95": both["ci95"]}


def pointwise_judge(stats: JobStats, out: Path) -> dict[str, Any]:
    """The pointwise judge's check from its verdict counts (`dualview.synth.verify`): gold
    positive = yes to the intended passage (P+ under the original, N* under the gold
    reversal); gold negative = no to the other key passage (N* under the original: the
    original-as-reversal control; P+ under the reversal). ``units`` counts verdicts."""
    counts = stats.counts
    roles = ("orig", "dv")
    pos = [counts.get(f"pw_intended_yes_{r}", 0) for r in roles]
    n_pos = [counts.get(f"pw_intended_{r}", 0) for r in roles]
    neg_yes = [counts.get(f"pw_rival_yes_{r}", 0) for r in roles]
    n_neg = [counts.get(f"pw_rival_{r}", 0) for r in roles]
    common = {
        "unparsable_judgements": counts.get("unparsable", 0),
        "failed_unit_answers": failed_answers(out),
        **cost(stats),
    }
    positive = {"units": sum(n_pos), **proportion(sum(pos), sum(n_pos)), **common}
    negative = {
        "units": sum(n_neg),
        **proportion(sum(n_neg) - sum(neg_yes), sum(n_neg)),
        **common,
    }
    by_check = {
        "gold_reversal_yes": proportion(pos[1], n_pos[1]),
        "original_as_reversal_no": proportion(n_neg[0] - neg_yes[0], n_neg[0]),
        "original_yes": proportion(pos[0], n_pos[0]),
        "positive_under_reversal_no": proportion(n_neg[1] - neg_yes[1], n_neg[1]),
    }
    return {
        "scoring": "pointwise",
        "gold_positive": positive,
        "gold_negative": negative,
        **balanced(positive, negative),
        "gold_units_passed": proportion(stats.outcomes.ok, stats.units),
        "by_check": by_check,
    }


def logodds_judge(stats: JobStats, out: Path, scoring: str = "logodds") -> dict[str, Any]:
    """The check of a judge that compares scores (`dualview.synth.verify`'s ``logodds`` and
    ``pairwise``): gold positive = N* wins over P+ under the gold reversal; gold negative =
    N* does not win under the original instruction (the original-as-reversal control), i.e.
    P+ wins there. ``units`` counts scenarios, one of each per gold pair."""
    counts = stats.counts
    common = {"unparsable_judgements": 0, "failed_unit_answers": failed_answers(out), **cost(stats)}
    checks = {
        role: proportion(counts.get(f"passed_{role}", 0), counts.get(f"judged_{role}", 0))
        for role in ("dv", "orig")
    }
    positive = {"units": checks["dv"]["n"], **checks["dv"], **common}
    negative = {"units": checks["orig"]["n"], **checks["orig"], **common}
    return {
        "scoring": scoring,
        "gold_positive": positive,
        "gold_negative": negative,
        **balanced(positive, negative),
        "gold_units_passed": proportion(stats.outcomes.ok, stats.units),
    }


def _unparsable_units(stats: JobStats) -> int:
    """Units rejected only for an unparsable judgement (one scenario per control unit)."""
    return min(stats.counts.get("unparsable", 0), stats.outcomes.rejected)


class SynthBench:
    """One benchmark run into ``out`` (see module docstring); `run` returns the report."""

    def __init__(self, config: BenchConfig, out: str | Path) -> None:
        if not config.shots or any(k < 0 for k in config.shots):
            raise ConfigError("shots: give one or more non-negative numbers of examples")
        if not config.judge and config.judge_only:
            raise ConfigError("judge: false (writer only) and judge_only: true exclude each other")
        if not config.judge and config.samples > 1:
            raise ConfigError(
                "judge: false (writer only) needs samples: 1 (the judge picks among candidates)"
            )
        self.config = config
        self.out = Path(out)
        gold_dir = config.gold_dir or GOLD_DIR
        self.pool = gold_pairs(load_gold(config.split, gold_dir), str(gold_dir))
        if not self.pool:
            raise DataError(split_path(config.split, gold_dir), None, "file", "no gold instances")
        self.gold_sha256 = hashlib.sha256(split_path(config.split, gold_dir).read_bytes())
        self.pairs = select_pairs(self.pool, config.limit)
        # orig id -> the gold reversed instruction, of the selected instances
        self.gold_reversals = {orig.id: dv.instruction for orig, dv in self.pairs}
        self.judge = config.judge_backend or config.backend

    def _run(
        self, task: Task, backend: BackendConfig, params: SamplingParams, source: Path, out: Path
    ) -> JobStats:
        out.parent.mkdir(parents=True, exist_ok=True)
        runner = make_runner(task, backend, params, self.config.runner)
        return runner.run(lambda: task.units(iter_records(source)), out, input_label=str(source))

    def write_inputs(self) -> dict[str, Path]:
        """The selected gold records as the runs' inputs (rewritten identically on resume)."""
        folder = self.out / "input"
        folder.mkdir(parents=True, exist_ok=True)
        paths = {
            "orig": folder / "gold_orig.jsonl",
            "pairs": folder / "gold_pairs.jsonl",
            "control": folder / "control.jsonl",
            "key_pairs": folder / "gold_key_pairs.jsonl",
        }
        write_jsonl(paths["orig"], [orig for orig, _ in self.pairs])
        write_jsonl(paths["pairs"], [r for pair in self.pairs for r in pair])
        write_jsonl(paths["control"], [negative_control(p) for p in self.pairs])
        write_jsonl(paths["key_pairs"], [r for p in self.pairs for r in key_passages(p)])
        return paths

    def run_judge(self, inputs: dict[str, Path]) -> dict[str, Any]:
        """The judge on the gold pairs (must pass) and on the negative control (must fail);
        a pointwise judge is checked on its per-passage verdicts (`pointwise_judge`)."""
        if self.config.verify.scoring != "choice":
            return self.run_pointwise_judge(inputs)
        verify = VerifyTask(self.config.verify)
        params = self.config.judge_sampling
        folder = self.out / "judge"
        gold_out, control_out = folder / "gold.jsonl", folder / "control.jsonl"
        gold = self._run(verify, self.judge, params, inputs["pairs"], gold_out)
        control = self._run(verify, self.judge, params, inputs["control"], control_out)
        positive = judge_metrics(gold, gold_out, True)
        negative = judge_metrics(control, control_out, False)
        return {
            "scoring": "choice",
            "gold_positive": positive,
            "gold_negative": negative,
            **balanced(positive, negative),
        }

    def run_pointwise_judge(self, inputs: dict[str, Path]) -> dict[str, Any]:
        """The pointwise judge on the gold pairs reduced to their key passages: under the
        original instruction P+ must be a yes and N* a no (the original-as-reversal control),
        under the gold reversal N* a yes and P+ a no. The control file is not run: its
        prompts are a subset of these."""
        out = self.out / "judge" / "gold_pointwise.jsonl"
        verify = VerifyTask(self.config.verify)
        gold = self._run(verify, self.judge, self.config.judge_sampling, inputs["key_pairs"], out)
        if self.config.verify.scoring in COMPARING_JUDGES:
            return logodds_judge(gold, out, self.config.verify.scoring)
        return pointwise_judge(gold, out)

    def _candidate_params(self, index: int) -> SamplingParams:
        """Sampling of reversal candidate ``index`` (0: ``sampling`` as configured)."""
        if index == 0:
            return self.config.sampling
        seed = (self.config.sampling.seed or 0) + index
        update = {"temperature": self.config.sample_temperature, "seed": seed}
        return self.config.sampling.model_copy(update=update)

    def _reverse_and_verify(
        self, task: GoldFewShotReverse, folder: Path, index: int, orig: Path
    ) -> tuple[JobStats, JobStats | None, Path]:
        """Candidate ``index``: the reversals (in ``folder``, or ``folder/sample-i``) and the
        judge's verdicts on them; returns both runs' stats (None for the judge's in a
        writer-only run, whose "verified" file is then the unjudged reversals)."""
        where = folder if index == 0 else folder / f"sample-{index}"
        reversed_out = where / "reverse.jsonl"
        params = self._candidate_params(index)
        rev = self._run(task, self.config.backend, params, orig, reversed_out)
        if not self.config.judge:
            return rev, None, reversed_out
        verify = VerifyTask(self.config.verify)
        verified = where / "verify.jsonl"
        ver = self._run(verify, self.judge, self.config.judge_sampling, reversed_out, verified)
        return rev, ver, verified

    def run_shots(self, shots: int, inputs: dict[str, Path]) -> dict[str, Any]:
        """Reverse the selected instances with ``shots`` examples, then judge the reversals;
        with ``samples`` > 1 also the self-consistency of all candidates."""
        folder = self.out / f"shots-{shots}"
        task = GoldFewShotReverse(self.pool, shots, self.config)
        runs = [
            self._reverse_and_verify(task, folder, i, inputs["orig"])
            for i in range(self.config.samples)
        ]
        rev, ver, _ = runs[0]
        reversed_out = folder / "reverse.jsonl"
        metrics = reverse_metrics(rev)
        # None: not judged (writer-only run)
        metrics["judge"] = (
            None
            if ver is None
            else {
                "passed": ver.outcomes.ok,
                "pass_rate": _ratio(ver.outcomes.ok, metrics["answered"]),
                "pass_rate_of_accepted": _ratio(ver.outcomes.ok, rev.outcomes.ok),
                "unparsable_judgements": ver.counts.get("unparsable", 0),
                "failed_unit_answers": failed_answers(folder / "verify.jsonl"),
                **cost(ver),
            }
        )
        metrics["closeness"] = closeness(
            list(iter_records(reversed_out)), self.gold_reversals, self.config.near_copy_ratio
        )
        metrics["complete"] = all(r.complete and (v is None or v.complete) for r, v, _ in runs)
        metrics["samples"] = self._samples(reversed_out)
        if self.config.samples > 1:
            metrics["self_consistency"] = self._self_consistency(runs, folder, metrics["answered"])
        return metrics

    def _self_consistency(
        self, runs: list[tuple[JobStats, JobStats | None, Path]], folder: Path, answered: int
    ) -> dict[str, Any]:
        """Instances with a verified candidate (the first one kept, in ``kept.jsonl``), and
        the cost of all candidates per instance."""
        kept: dict[str, Record] = {}
        for _, _, verified in runs:
            for record in iter_records(verified):
                if record.view == "dv" and record.parent_id:
                    kept.setdefault(record.parent_id, record)
        order = {orig.id: i for i, (orig, _) in enumerate(self.pairs)}
        chosen = sorted(kept.values(), key=lambda r: order.get(r.parent_id or "", len(order)))
        write_jsonl(folder / "kept.jsonl", chosen)
        units = runs[0][0].units or 1
        return {
            "k": len(runs),
            "sample_temperature": self.config.sample_temperature,
            "accepted_by_writer": [r.outcomes.ok for r, _, _ in runs],
            "verified": [v.outcomes.ok for _, v, _ in runs if v is not None],
            "instances_verified": len(chosen),
            "verified_rate": _ratio(len(chosen), answered),
            "closeness": closeness(chosen, self.gold_reversals, self.config.near_copy_ratio),
            "seconds_per_record": _ratio(
                sum(_llm_seconds(r) + (_llm_seconds(v) if v else 0.0) for r, v, _ in runs),
                units,
            ),
        }

    def _samples(self, reversed_out: Path, n: int = 5) -> list[dict[str, str]]:
        gold = self.gold_reversals
        return [
            {
                "id": r.parent_id or "",
                "original": str(r.meta.get("orig_instruction", "")),
                "produced": r.instruction,
                "gold": gold.get(r.parent_id or "", ""),
            }
            for r, _ in zip(iter_records(reversed_out), range(n), strict=False)
        ]

    def run(self) -> dict[str, Any]:
        """All runs, then ``bench.json`` and ``bench.md`` in ``out``. Writer only (``judge:
        false``): the report's ``judged`` is false and its judge fields are None."""
        inputs = self.write_inputs()
        if not self.config.judge:
            return self._write(self._report(judged=False), None, inputs)
        judge = self.run_judge(inputs)  # checked first: its verdicts below count only if trusted
        return self._write(self._report(judged=True), judge, inputs)

    def _report(self, judged: bool) -> dict[str, Any]:
        judge = self.judge.model_dump(mode="json", exclude={"api_key_env"}) if judged else None
        return {
            "benchmark": "bench-synth",
            "split": self.config.split,
            "gold_sha256": self.gold_sha256.hexdigest(),
            "instances": len(self.pairs),
            "domains": dict(sorted(Counter(_domain(o) for o, _ in self.pairs).items())),
            "backend": self.config.backend.model_dump(mode="json", exclude={"api_key_env"}),
            "judged": judged,
            "judge_backend": judge,
            "config": self.config.model_dump(mode="json"),
            "shots": {},
        }

    def _write(
        self, report: dict[str, Any], judge: dict[str, Any] | None, inputs: dict[str, Path]
    ) -> dict[str, Any]:
        """The reversals (after the judge's check, whose verdicts count only if trusted),
        then ``bench.json`` and ``bench.md``."""
        if judge is not None:
            # Trusted when the evidence says so: the Wilson interval's lower end (the point
            # value where there is no interval) reaches the bar, so a handful of instances
            # cannot pass.
            low = (judge.get("balanced_ci95") or [judge["balanced_accuracy"]])[0]
            judge["trusted"] = low is not None and low >= self.config.trust_balanced_accuracy
            judge["trust_balanced_accuracy"] = self.config.trust_balanced_accuracy
        for shots in [] if self.config.judge_only else self.config.shots:
            report["shots"][str(shots)] = self.run_shots(shots, inputs)
        report["judge"] = judge
        atomic_write_text(self.out / "bench.json", json.dumps(report, indent=2) + "\n")
        atomic_write_text(self.out / "bench.md", markdown_table(report))
        return report


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _ci(ci: list[float] | None) -> str:
    return "" if not ci else f" [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"


def _settings(report: dict[str, Any]) -> str:
    """The options beyond the defaults that the run used, for the table's caption."""
    config = report.get("config", {})
    verify, reverse = config.get("verify", {}), config.get("reverse", {})
    found = []
    if report.get("judged", True):
        found += [f"judge scoring {verify.get('scoring', 'choice')}"]
        found += ["constrained judge"] if verify.get("constrained") else []
    found += ["constrained writer"] if reverse.get("constrained") else []
    if config.get("samples", 1) > 1:
        found.append(f"{config['samples']} candidates (T {config['sample_temperature']})")
    return ", ".join(found)


def _self_consistency_lines(report: dict[str, Any]) -> list[str]:
    rows = [
        (k, m["self_consistency"]) for k, m in report["shots"].items() if "self_consistency" in m
    ]
    if not rows:
        return []
    lines = [
        "| shots | candidates | accepted by writer (per candidate) | judge-verified (per "
        "candidate) | instances with a verified candidate | near-copies of original "
        "| s/record (all candidates, writer + judge) |",
        "|---|---|---|---|---|---|---|",
    ]
    for shots, sc in rows:
        lines.append(
            f"| {shots} | {sc['k']} | {', '.join(map(str, sc['accepted_by_writer']))} "
            f"| {', '.join(map(str, sc['verified']))} | {sc['instances_verified']} "
            f"({_pct(sc['verified_rate'])}) "
            f"| {sc['closeness']['near_copies_of_original']}/{sc['closeness']['accepted']} "
            f"| {_num(sc['seconds_per_record'])} |"
        )
    return [*lines, ""]


def _trust_line(report: dict[str, Any]) -> list[str]:
    """Whether the judge passed its gold check (reports written before it say nothing)."""
    judge = report["judge"]
    if judge is None:
        return [
            "Not judged: writer-only run (`judge: false`), no judge call at all; accepted "
            "means only that the writer's answer passed the reversal checks.",
            "",
        ]
    if "trusted" not in judge:
        return []
    bar = _pct(judge["trust_balanced_accuracy"])
    if judge["trusted"]:
        return [f"Judge trusted: balanced accuracy on the gold check >= {bar} (95% CI).", ""]
    return [
        f"Judge NOT trusted: balanced accuracy on the gold check not shown >= {bar} (lower end "
        "of its 95% CI), so its verdicts on the reversals above are no evidence of their "
        "quality.",
        "",
    ]


def _logodds_lines(judge: dict[str, Any]) -> list[str]:
    """A comparing judge's check: one comparison per instruction and gold pair."""
    pos, neg = judge["gold_positive"], judge["gold_negative"]
    rows = [
        ("N* outscores P+ under the gold reversal", pos),
        ("P+ outscores N* under the original (control: N* must not win)", neg),
    ]
    units = judge["gold_units_passed"]
    return [
        f"| judge check ({COMPARING_JUDGES[judge['scoring']]}) | comparisons "
        "| accuracy [Wilson 95%] |",
        "|---|---|---|",
        *(f"| {name} | {c['n']} | {_pct(c['accuracy'])}{_ci(c['ci95'])} |" for name, c in rows),
        f"| balanced (both) | {pos['units'] + neg['units']} "
        f"| {_pct(judge['balanced_accuracy'])}{_ci(judge.get('balanced_ci95'))} |",
        f"| gold pairs with both right | {units['n']} "
        f"| {_pct(units['accuracy'])}{_ci(units['ci95'])} |",
        "",
        f"Judge s/unit: {_num(pos['seconds_per_record'])}; prompt tokens/unit: "
        f"{_num(pos['tokens_in_per_record'])}.",
        "",
    ]


def _judge_lines(judge: dict[str, Any]) -> list[str]:
    if judge.get("scoring") in COMPARING_JUDGES:
        return _logodds_lines(judge)
    pos, neg = judge["gold_positive"], judge["gold_negative"]
    if judge.get("scoring") == "pointwise":
        checks = judge["by_check"]
        names = {
            "gold_reversal_yes": "N* under the gold reversal: yes",
            "original_as_reversal_no": "N* under the original (control): no",
            "original_yes": "P+ under the original: yes",
            "positive_under_reversal_no": "P+ under the gold reversal: no",
        }
        lines = [
            "| judge check (pointwise, each passage alone, both orders) | verdicts "
            "| accuracy [Wilson 95%] |",
            "|---|---|---|",
        ]
        lines += [
            f"| {names[k]} | {c['n']} | {_pct(c['accuracy'])}{_ci(c['ci95'])} |"
            for k, c in checks.items()
        ]
        units = judge["gold_units_passed"]
        return [
            *lines,
            f"| balanced (all four) | {pos['units'] + neg['units']} "
            f"| {_pct(judge['balanced_accuracy'])}{_ci(judge.get('balanced_ci95'))} |",
            f"| gold pairs with every verdict right | {units['n']} "
            f"| {_pct(units['accuracy'])}{_ci(units['ci95'])} |",
            "",
            f"Unparsable judgements: {pos['unparsable_judgements']}; judge s/unit: "
            f"{_num(pos['seconds_per_record'])}.",
            "",
        ]
    return [
        "| judge check | units | accuracy | unparsable judgements | s/unit |",
        "|---|---|---|---|---|",
        f"| gold reversal passes (orig + gold dv) | {pos['units']} | {_pct(pos['accuracy'])} "
        f"| {pos['unparsable_judgements']} | {_num(pos['seconds_per_record'])} |",
        f"| original as reversal fails (control) | {neg['units']} | {_pct(neg['accuracy'])} "
        f"| {neg['unparsable_judgements']} | {_num(neg['seconds_per_record'])} |",
        f"| balanced | {pos['units'] + neg['units']} | {_pct(judge['balanced_accuracy'])}"
        f"{_ci(balanced(pos, neg)['balanced_ci95'])} | | |",
        "",
        "Most common raw judge answers in failed gold units: "
        + (", ".join(f"`{a}` x{n}" for a, n in pos["failed_unit_answers"].items()) or "-"),
        "",
    ]


def markdown_table(report: dict[str, Any]) -> str:
    """The report as Markdown: one row per shots setting, the self-consistency of sampled
    candidates when there were several, then the judge's accuracy."""
    judge_backend = report["judge_backend"]
    judge_name = f"judge `{judge_backend['model']}`" if judge_backend else "no judge (not judged)"
    settings = _settings(report)
    lines = [
        f"Gold {report['split']} split, {report['instances']} instances; "
        f"backend `{report['backend']['model']}`, {judge_name}"
        f"{f'; {settings}' if settings else ''}.",
        "",
    ]
    if not report["shots"]:
        return "\n".join([*lines, *_judge_lines(report["judge"]), *_trust_line(report)])
    lines += [
        "| shots | records | parse rate | None rate | accepted | near-copies of original "
        "| rejections | judge pass | s/record (reverse) | s/record (judge) "
        "| tokens in/out per record |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shots, m in report["shots"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in m["rejection_reasons"].items()) or "-"
        verdicts = m["judge"]  # None: not judged
        lines.append(
            f"| {shots} | {m['records']} | {_pct(m['parse_rate'])} | {_pct(m['none_rate'])} "
            f"| {_pct(m['accepted_rate'])} "
            f"| {m['closeness']['near_copies_of_original']}/{m['closeness']['accepted']} "
            f"| {reasons} | {_pct(verdicts['pass_rate']) if verdicts else 'not judged'} "
            f"| {_num(m['seconds_per_record'])} "
            f"| {_num(verdicts['seconds_per_record']) if verdicts else 'not judged'} "
            f"| {_num(m['tokens_in_per_record'])} / {_num(m['tokens_out_per_record'])} |"
        )
    lines.append("")
    judge = _judge_lines(report["judge"]) if report["judge"] is not None else []
    return "\n".join([*lines, *_self_consistency_lines(report), *judge, *_trust_line(report)])
