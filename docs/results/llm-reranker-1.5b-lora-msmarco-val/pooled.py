"""The pooled analysis of plan.txt (amendment of session 22): each seed's arm at its own chosen
weight, renamed `orig` / `DV` so that the seeds' rows share names, a query's values averaged
over the seeds first (as `dualview report --seeds`), comparisons orig vs first stage, DV vs
first stage and DV vs orig, Holm over these 3 per metric.

`python pooled.py OUT SEED...` (run in runs/h37M): reports of test/ (gold test split +
phenomenon set) and msmarco/ (MS MARCO, first 100) into OUT/test and OUT/msmarco."""

import dataclasses
import json
import sys
from pathlib import Path

from dualview.report import ReportOptions, write_report
from dualview.report.collect import eval_folder_rows
from dualview.report.table import aggregate, parse_prefixes

F = "embedded:minilm"
CHOSEN = {1: "chosen_weights.json"}  # seeds 2 and later: chosen_weights_sSEED.json
PAIRS = [("orig", F), ("DV", F), ("DV", "orig")]
METRICS = {
    "test": "paired p-MRR,paired nDCG@10,paired pairwise,phenomena p-MRR,phenomena nDCG@10",
    "msmarco": "beir nDCG@10",
}


def seed_columns(seed: int) -> dict[str, str]:
    """The eval column of each arm of ``seed`` at its chosen weight, by its pooled name."""
    arms = json.loads(Path(CHOSEN.get(seed, f"chosen_weights_s{seed}.json")).read_text())["arms"]
    out = {}
    for name in ("orig", "DV"):
        arm = name if seed == 1 else f"{name}-s{seed}"
        w = arms[arm]["weight"]
        out[f"{arm}@{F}" if w == 1.0 else f"{arm}~{w}@{F}"] = name
    return out


def seed_rows(folder: str, seed: int) -> list:
    """The first stage and the two arms of ``seed`` from the eval folder, arms renamed."""
    columns = seed_columns(seed)
    rows = {row.name: row for row in eval_folder_rows(Path(folder))}
    missing = [c for c in [F, *columns] if c not in rows]
    if missing:
        raise SystemExit(f"{folder}: no column {missing[0]!r} (seed {seed})")
    return [rows[F]] + [dataclasses.replace(rows[c], name=n) for c, n in columns.items()]


def main() -> None:
    out, seeds = Path(sys.argv[1]), [int(s) for s in sys.argv[2:]]
    for folder, metrics in METRICS.items():
        rows = aggregate([seed_rows(folder, s) for s in seeds])
        options = ReportOptions(comparisons=PAIRS, error_pairs=[("DV", "orig")] if folder == "test" else [],
                                metrics=list(parse_prefixes(metrics)))
        title = f"LoRA-1.5B rerankers at each seed's chosen weight, seeds {', '.join(map(str, seeds))} pooled"
        files = write_report(rows, out / folder, title=title, options=options)
        print(folder, "->", files)


if __name__ == "__main__":
    main()
