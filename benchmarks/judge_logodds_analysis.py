"""What the log-odds judge's scores say beyond its verdicts (issue 36 item 2).

Reads a ``dualview bench-synth ... --set verify.scoring=logodds --set judge_only=true`` run
folder (its judge cache holds every passage's score, in both orders, as the raw answers) and
the gold split, and writes one JSON file with, per model:

- the verdicts at offset 0 (the judge's own rule: the intended passage must outscore the
  other) recomputed from the scores, as a check against the run's counts;
- the **instruction sensitivity**: the share of gold pairs where the reversal moves the score
  difference d = s(N*) - s(P+) towards N* (d under the reversal > d under the original),
  whatever the judge's bias;
- the **position effect**: the mean score of a passage shown first minus shown second;
- a **calibrated offset** b (N* wins when d > b), chosen by 2-fold cross-fitting over the
  domains (b is chosen on the domains of one fold and applied to the other; sorted domain
  names alternate between folds), so no reported verdict was made with an offset chosen on
  it: balanced accuracy with its Wilson 95% interval.

Usage: python benchmarks/judge_logodds_analysis.py OUT.json NAME=RUN_FOLDER [NAME=RUN_FOLDER ...]
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
from dualview.proportions import wilson_interval


def pair_scores(run: Path) -> dict[str, dict[str, Any]]:
    """Per gold pair (orig id): domain and the mean score of P+ and N* under each instruction,
    read from the judge cache (raw answers: the orig scenario's two passages sorted by id,
    each in both orders, then the reversal's)."""
    pairs = {orig.id: (orig, dv) for orig, dv in gold_pairs(load_gold("train", GOLD_DIR))}
    found: dict[str, dict[str, Any]] = {}
    for line in (run / "judge" / "gold_pointwise.jsonl.cache.jsonl").read_text().splitlines():
        entry = json.loads(line)
        raw = [float(x) for x in entry["outcome"]["raw"]]
        orig, dv = pairs[entry["unit"]]
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


def proportion(k: int, n: int) -> dict[str, Any]:
    ci = [round(x, 4) for x in wilson_interval(k, n)] if n else None
    return {"correct": k, "n": n, "accuracy": round(k / n, 4) if n else None, "ci95": ci}


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


def main(argv: list[str]) -> None:
    out, runs = Path(argv[0]), [a.split("=", 1) for a in argv[1:]]
    result = {name: analyse(pair_scores(Path(folder))) for name, folder in runs}
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
