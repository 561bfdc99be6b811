"""What a comparing judge's scores say beyond its verdicts (issue 36 item 2).

Reads ``dualview bench-synth ... --set judge_only=true`` run folders of the judges that
compare scores, ``verify.scoring=logodds`` (a score per passage: its judge cache holds every
passage's score, in both orders, as the raw answers) or ``verify.scoring=pairwise`` (a
preference between P+ and N* shown together, in both orders), and the gold split, and writes
one JSON file with, per run (the score difference d is s(N*) - s(P+) for ``logodds`` and the
preference for N* over P+ for ``pairwise``):

- the verdicts at offset 0 (the judge's own rule: the intended passage must outscore the
  other) recomputed from the scores, as a check against the run's counts;
- the **instruction sensitivity**: the share of gold pairs where the reversal moves the score
  difference d = s(N*) - s(P+) towards N* (d under the reversal > d under the original),
  whatever the judge's bias;
- the **position effect**: ``logodds``: the mean score of a passage shown first minus shown
  second; ``pairwise``: the mean log-odds of ``1`` against ``2`` over both orders (how much
  the judge prefers whichever passage stands first);
- a **calibrated offset** b (N* wins when d > b), chosen by 2-fold cross-fitting over the
  domains (b is chosen on the domains of one fold and applied to the other; sorted domain
  names alternate between folds), so no reported verdict was made with an offset chosen on
  it: balanced accuracy with its Wilson 95% interval;

and, for each ``--compare A:B``, the two judges' comparisons at offset 0 on the gold pairs
both ran, paired: how many each got right alone, and the exact McNemar p-value.

Usage: python benchmarks/judge_logodds_analysis.py OUT.json NAME=RUN_FOLDER [NAME=RUN_FOLDER ...]
       [--compare NAME:NAME ...]
"""

from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path
from statistics import fmean
from typing import Any

from dualview.data.gold import GOLD_DIR, load_gold
from dualview.data.gold_pairs import gold_pairs
from dualview.proportions import mcnemar_exact
from dualview.synth.bench import proportion


def _cached(run: Path) -> list[tuple[Any, Any, list[float]]]:
    """(orig, dv, raw scores) per judged gold pair, from the run's judge cache."""
    pairs = {orig.id: (orig, dv) for orig, dv in gold_pairs(load_gold("train", GOLD_DIR))}
    found = []
    for line in (run / "judge" / "gold_pointwise.jsonl.cache.jsonl").read_text().splitlines():
        entry = json.loads(line)
        found.append((*pairs[entry["unit"]], [float(x) for x in entry["outcome"]["raw"]]))
    return found


def scoring_of(run: Path) -> str:
    """The judge's scoring, from the run's report."""
    report = json.loads((run / "bench.json").read_text())
    return str(report["judge"]["scoring"])


def pair_scores(run: Path) -> dict[str, dict[str, Any]]:
    """Per gold pair (orig id): domain, d under each instruction and the position effect."""
    if scoring_of(run) == "pairwise":
        return pairwise_scores(run)
    return logodds_scores(run)


def pairwise_scores(run: Path) -> dict[str, dict[str, Any]]:
    """The pairwise judge's raw answers per pair: under the original (intended P+) the
    log-odds of 1 with P+ first, then with N* first; then under the reversal (intended N*)
    with N* first, then with P+ first."""
    found: dict[str, dict[str, Any]] = {}
    for orig, _, raw in _cached(run):
        found[orig.id] = {
            "domain": str(orig.meta.get("domain")),
            "d_orig": (raw[1] - raw[0]) / 2,
            "d_rev": (raw[2] - raw[3]) / 2,
            "position": fmean(raw),
        }
    return found


def logodds_scores(run: Path) -> dict[str, dict[str, Any]]:
    """Per gold pair: the mean score of P+ and N* under each instruction, from the raw
    answers (the orig scenario's two passages sorted by id, each in both orders, then the
    reversal's)."""
    found: dict[str, dict[str, Any]] = {}
    for orig, dv, raw in _cached(run):
        p_plus, n_star = orig.positives[0].id, dv.positives[0].id
        ids = sorted([p_plus, n_star])
        score = {
            (instr, doc): fmean(raw[4 * k + 2 * ids.index(doc) : 4 * k + 2 * ids.index(doc) + 2])
            for k, instr in enumerate(("orig", "rev"))
            for doc in ids
        }
        first = [raw[i + 1] - raw[i] for i in range(0, len(raw), 2)]  # passage first - second
        found[orig.id] = {
            "domain": str(orig.meta.get("domain")),
            "d_orig": score[("orig", n_star)] - score[("orig", p_plus)],
            "d_rev": score[("rev", n_star)] - score[("rev", p_plus)],
            "position": fmean(first),
        }
    return found


def correct(rows: list[dict[str, Any]], offset: float) -> int:
    """Right comparisons at ``offset`` (the judge's rule at 0): N* wins under the reversal
    (d > offset) and P+ under the original (d < offset)."""
    return sum(r["d_rev"] > offset for r in rows) + sum(r["d_orig"] < offset for r in rows)


def best_offset(rows: list[dict[str, Any]]) -> float:
    """The offset with the most right comparisons on ``rows`` (midpoints between the sorted
    differences; ties: the one closest to 0)."""
    values = sorted({r["d_rev"] for r in rows} | {r["d_orig"] for r in rows})
    candidates = [0.0, *((a + b) / 2 for a, b in pairwise(values))]
    return max(candidates, key=lambda b: (correct(rows, b), -abs(b)))


def analyse(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    data = list(rows.values())
    domains = sorted({r["domain"] for r in data})
    folds = [set(domains[0::2]), set(domains[1::2])]
    held_out, offsets = 0, []
    for fold in range(2):
        fit = [r for r in data if r["domain"] not in folds[fold]]
        test = [r for r in data if r["domain"] in folds[fold]]
        offset = best_offset(fit)
        offsets.append(round(offset, 4))
        held_out += correct(test, offset)
    n = len(data)
    return {
        "pairs": n,
        "domains": len(domains),
        "offset_0": {
            "reversal_n_star_wins": proportion(sum(r["d_rev"] > 0 for r in data), n),
            "original_p_plus_wins": proportion(sum(r["d_orig"] < 0 for r in data), n),
            "balanced": proportion(correct(data, 0.0), 2 * n),
        },
        "instruction_sensitivity": proportion(sum(r["d_rev"] > r["d_orig"] for r in data), n),
        "mean_d_orig": round(fmean(r["d_orig"] for r in data), 4),
        "mean_d_rev": round(fmean(r["d_rev"] for r in data), 4),
        "position_effect_mean": round(fmean(r["position"] for r in data), 4),
        "cross_fitted_offset": {"offsets": offsets, "balanced": proportion(held_out, 2 * n)},
    }


def compare(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]) -> dict:
    """Two judges' comparisons at offset 0 on the pairs both judged, paired (McNemar)."""
    shared = sorted(first.keys() & second.keys())

    def right(rows: dict[str, dict[str, Any]]) -> list[bool]:
        return [rows[k]["d_rev"] > 0 for k in shared] + [rows[k]["d_orig"] < 0 for k in shared]

    a, b = right(first), right(second)
    only_first = sum(x and not y for x, y in zip(a, b, strict=True))
    only_second = sum(y and not x for x, y in zip(a, b, strict=True))
    return {
        "pairs": len(shared),
        "first": proportion(sum(a), len(a)),
        "second": proportion(sum(b), len(b)),
        "only_first_right": only_first,
        "only_second_right": only_second,
        "mcnemar_p": round(mcnemar_exact(only_first, only_second), 6),
    }


def _cell(p: dict[str, Any]) -> str:
    low, high = p["ci95"]
    return (
        f"{p['correct']}/{p['n']} = {100 * p['accuracy']:.0f}% [{100 * low:.0f}, {100 * high:.0f}]"
    )


def markdown(result: dict[str, Any]) -> str:
    """The analysis as a Markdown table, one row per model (what docs/results.md shows)."""
    lines = [
        "| judge | gold pairs | balanced, offset 0 (the judge's rule) | instruction sensitivity "
        "| mean d: original / reversal | position effect (first - second) "
        "| balanced, cross-fitted offset (offsets) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in result.items():
        fitted = r["cross_fitted_offset"]
        lines.append(
            f"| {name} | {r['pairs']} | {_cell(r['offset_0']['balanced'])} "
            f"| {_cell(r['instruction_sensitivity'])} "
            f"| {r['mean_d_orig']:+.2f} / {r['mean_d_rev']:+.2f} "
            f"| {r['position_effect_mean']:+.2f} "
            f"| {_cell(fitted['balanced'])} ({', '.join(f'{b:+.2f}' for b in fitted['offsets'])}) |"
        )
    return "\n".join(lines) + "\n"


def comparison_markdown(comparisons: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| judges (first vs second) | gold pairs | first, offset 0 | second, offset 0 "
        "| right by the first alone / the second alone | McNemar p |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in comparisons.items():
        lines.append(
            f"| {name} | {c['pairs']} | {_cell(c['first'])} | {_cell(c['second'])} "
            f"| {c['only_first_right']} / {c['only_second_right']} | {c['mcnemar_p']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def check_against_run(name: str, run: Path, result: dict[str, Any]) -> None:
    """The verdicts recomputed from the scores must be the run's own counts."""
    judge = json.loads((run / "bench.json").read_text())["judge"]
    ours = result["offset_0"]
    expected = (judge["gold_positive"]["correct"], judge["gold_negative"]["correct"])
    found = (ours["reversal_n_star_wins"]["correct"], ours["original_p_plus_wins"]["correct"])
    if found != expected:
        raise SystemExit(f"{name}: verdicts from the scores {found} differ from {run}'s {expected}")


def main(argv: list[str]) -> None:
    pairs = (
        [a.split(":", 1) for a in argv[argv.index("--compare") + 1 :]]
        if "--compare" in argv
        else []
    )
    argv = argv[: argv.index("--compare")] if "--compare" in argv else argv
    out, runs = Path(argv[0]), [a.split("=", 1) for a in argv[1:]]
    scores = {name: pair_scores(Path(folder)) for name, folder in runs}
    result: dict[str, Any] = {name: analyse(rows) for name, rows in scores.items()}
    for name, folder in runs:
        check_against_run(name, Path(folder), result[name])
    comparisons = {f"{a} vs {b}": compare(scores[a], scores[b]) for a, b in pairs}
    if comparisons:
        result["comparisons"] = comparisons
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown({k: v for k, v in result.items() if k != "comparisons"}))
    if comparisons:
        print(comparison_markdown(comparisons))


if __name__ == "__main__":
    main(sys.argv[1:])
