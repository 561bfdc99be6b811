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

from pydantic import Field

from dualview.config import StrictModel
from dualview.data.gold import GOLD_DIR, load_gold, split_path
from dualview.data.gold_check import char_ratio
from dualview.data.gold_pairs import GoldPair, gold_pairs, negative_control
from dualview.data.jsonl import iter_records
from dualview.data.schema import Record
from dualview.errors import ConfigError, DataError
from dualview.io.atomic import atomic_write_text, write_jsonl
from dualview.io.files import iter_json_lines
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.reverse import ReverseConfig, ReverseExample, ReverseTask
from dualview.synth.runner import RunnerConfig, make_runner, side_path
from dualview.synth.task import LLM, Outcome, Task, one_per_record, truncate
from dualview.synth.verify import VerifyConfig, VerifyTask

# Rejection reasons that mean the answer did not follow the reply format at all.
FORMAT_FAILURES = ("no_answer", "multiple_answers", "malformed")


class BenchConfig(StrictModel):
    """Settings of one benchmark; everything that changes answers is in the runners' keys."""

    backend: BackendConfig = BackendConfig()
    # The judge; None = the synthesis backend.
    judge_backend: BackendConfig | None = None
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


def _domain(record: Record) -> str:
    return str(record.meta.get("domain") or "")


def _rank(*parts: object) -> str:
    """A deterministic pseudo-random sort key."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


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


def cost(stats: dict[str, Any]) -> dict[str, Any]:
    """LLM seconds and tokens per unit (summed latencies, so resumed runs count right)."""
    units = stats["units"]
    mean = stats["latency_s"]["mean"] or 0.0
    return {
        "llm_calls": stats["llm_calls"],
        "seconds_per_record": _ratio(mean * stats["llm_calls"], units),
        "tokens_in_per_record": _ratio(stats["tokens_in"], units),
        "tokens_out_per_record": _ratio(stats["tokens_out"], units),
        "wall_s_this_run": stats["wall_s"],
    }


def reverse_metrics(stats: dict[str, Any]) -> dict[str, Any]:
    """Parse, None and accepted rates over the answered units, and rejections by reason (the
    runner's count in ``stats``)."""
    outcomes = stats["outcomes"]
    reasons = Counter(stats["rejections"])
    answered = stats["units"] - outcomes["skipped"] - outcomes["error"]
    unparsed = sum(reasons[code] for code in FORMAT_FAILURES)
    return {
        "records": stats["units"],
        "answered": answered,
        "outcomes": outcomes,
        "parse_rate": _ratio(answered - unparsed, answered),
        "none_rate": _ratio(outcomes["impossible"], answered),
        "accepted_rate": _ratio(outcomes["ok"], answered),
        "rejection_reasons": dict(sorted(reasons.items())),
        **cost(stats),
    }


def judge_metrics(stats: dict[str, Any], out: Path, expect_pass: bool) -> dict[str, Any]:
    """Judge accuracy on units whose right verdict is known: pass (gold) or fail (control)."""
    units = stats["units"]
    passed = stats["outcomes"]["ok"]
    unparsable_units = _unparsable_units(stats)
    correct = passed if expect_pass else units - passed - unparsable_units
    return {
        "units": units,
        "passed": passed,
        "unparsable_judgements": stats["counts"].get("unparsable", 0),
        "accuracy": _ratio(correct, units),
        "scenario_accuracy": stats["summary"].get("scenario_accuracy", {}),
        "failed_unit_answers": failed_answers(out),
        **cost(stats),
    }


def _unparsable_units(stats: dict[str, Any]) -> int:
    """Units rejected only for an unparsable judgement (one scenario per control unit)."""
    return min(stats["counts"].get("unparsable", 0), stats["outcomes"]["rejected"])


class SynthBench:
    """One benchmark run into ``out`` (see module docstring); `run` returns the report."""

    def __init__(self, config: BenchConfig, out: str | Path) -> None:
        if not config.shots or any(k < 0 for k in config.shots):
            raise ConfigError("shots: give one or more non-negative numbers of examples")
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
    ) -> dict[str, Any]:
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
        }
        write_jsonl(paths["orig"], [orig for orig, _ in self.pairs])
        write_jsonl(paths["pairs"], [r for pair in self.pairs for r in pair])
        write_jsonl(paths["control"], [negative_control(p) for p in self.pairs])
        return paths

    def run_judge(self, inputs: dict[str, Path]) -> dict[str, Any]:
        """The judge on the gold pairs (must pass) and on the negative control (must fail)."""
        verify = VerifyTask(self.config.verify)
        params = self.config.judge_sampling
        folder = self.out / "judge"
        gold_out, control_out = folder / "gold.jsonl", folder / "control.jsonl"
        gold = self._run(verify, self.judge, params, inputs["pairs"], gold_out)
        control = self._run(verify, self.judge, params, inputs["control"], control_out)
        positive = judge_metrics(gold, gold_out, True)
        negative = judge_metrics(control, control_out, False)
        accs = [positive["accuracy"], negative["accuracy"]]
        balanced = sum(accs) / 2 if None not in accs else None
        return {"gold_positive": positive, "gold_negative": negative, "balanced_accuracy": balanced}

    def run_shots(self, shots: int, inputs: dict[str, Path]) -> dict[str, Any]:
        """Reverse the selected instances with ``shots`` examples, then judge the reversals."""
        folder = self.out / f"shots-{shots}"
        task = GoldFewShotReverse(self.pool, shots, self.config)
        reversed_out = folder / "reverse.jsonl"
        rev = self._run(
            task, self.config.backend, self.config.sampling, inputs["orig"], reversed_out
        )
        metrics = reverse_metrics(rev)
        ver = self._run(
            VerifyTask(self.config.verify),
            self.judge,
            self.config.judge_sampling,
            reversed_out,
            folder / "verify.jsonl",
        )
        metrics["judge"] = {
            "passed": ver["outcomes"]["ok"],
            "pass_rate": _ratio(ver["outcomes"]["ok"], metrics["answered"]),
            "pass_rate_of_accepted": _ratio(ver["outcomes"]["ok"], rev["outcomes"]["ok"]),
            "unparsable_judgements": ver["counts"].get("unparsable", 0),
            "failed_unit_answers": failed_answers(folder / "verify.jsonl"),
            **cost(ver),
        }
        metrics["closeness"] = closeness(
            list(iter_records(reversed_out)), self.gold_reversals, self.config.near_copy_ratio
        )
        metrics["complete"] = bool(rev["complete"] and ver["complete"])
        metrics["samples"] = self._samples(reversed_out)
        return metrics

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
        """All runs, then ``bench.json`` and ``bench.md`` in ``out``."""
        inputs = self.write_inputs()
        report: dict[str, Any] = {
            "benchmark": "bench-synth",
            "split": self.config.split,
            "gold_sha256": self.gold_sha256.hexdigest(),
            "instances": len(self.pairs),
            "domains": dict(sorted(Counter(_domain(o) for o, _ in self.pairs).items())),
            "backend": self.config.backend.model_dump(mode="json", exclude={"api_key_env"}),
            "judge_backend": self.judge.model_dump(mode="json", exclude={"api_key_env"}),
            "config": self.config.model_dump(mode="json"),
            "shots": {},
        }
        for shots in self.config.shots:
            report["shots"][str(shots)] = self.run_shots(shots, inputs)
        report["judge"] = self.run_judge(inputs)
        atomic_write_text(self.out / "bench.json", json.dumps(report, indent=2) + "\n")
        atomic_write_text(self.out / "bench.md", markdown_table(report))
        return report


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def markdown_table(report: dict[str, Any]) -> str:
    """The report as Markdown: one row per shots setting, then the judge's accuracy."""
    lines = [
        f"Gold {report['split']} split, {report['instances']} instances; "
        f"backend `{report['backend']['model']}`, judge `{report['judge_backend']['model']}`.",
        "",
        "| shots | records | parse rate | None rate | accepted | near-copies of original "
        "| rejections | judge pass | s/record (reverse) | s/record (judge) "
        "| tokens in/out per record |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shots, m in report["shots"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in m["rejection_reasons"].items()) or "-"
        lines.append(
            f"| {shots} | {m['records']} | {_pct(m['parse_rate'])} | {_pct(m['none_rate'])} "
            f"| {_pct(m['accepted_rate'])} "
            f"| {m['closeness']['near_copies_of_original']}/{m['closeness']['accepted']} "
            f"| {reasons} | {_pct(m['judge']['pass_rate'])} "
            f"| {_num(m['seconds_per_record'])} | {_num(m['judge']['seconds_per_record'])} "
            f"| {_num(m['tokens_in_per_record'])} / {_num(m['tokens_out_per_record'])} |"
        )
    judge = report["judge"]
    pos, neg = judge["gold_positive"], judge["gold_negative"]
    lines += [
        "",
        "| judge check | units | accuracy | unparsable judgements | s/unit |",
        "|---|---|---|---|---|",
        f"| gold reversal passes (orig + gold dv) | {pos['units']} | {_pct(pos['accuracy'])} "
        f"| {pos['unparsable_judgements']} | {_num(pos['seconds_per_record'])} |",
        f"| original as reversal fails (control) | {neg['units']} | {_pct(neg['accuracy'])} "
        f"| {neg['unparsable_judgements']} | {_num(neg['seconds_per_record'])} |",
        f"| balanced | | {_pct(judge['balanced_accuracy'])} | | |",
        "",
        "Most common raw judge answers in failed gold units: "
        + (", ".join(f"`{a}` x{n}" for a, n in pos["failed_unit_answers"].items()) or "-"),
        "",
    ]
    return "\n".join(lines)
