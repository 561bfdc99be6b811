"""plan.txt: the blind review of the kept reversals joined with the candidate each came from
(1 = greedy, 2 = sampled at T 0.7): real share per source with Wilson 95% CIs, Fisher's exact
test between them, and the issue's goal (real >= half among the kept, on 40 items).

Usage: python summarize.py RUN_FOLDER KEY/key.jsonl LABELS.jsonl OUT.json
"""

import json
import sys
from pathlib import Path

from scipy.stats import fisher_exact

from dualview.data.jsonl import iter_records
from dualview.review.stats import proportion

run, key_path, labels_path, out = map(Path, sys.argv[1:5])
folder = run / "shots-2"
sources = [folder / "verify.jsonl", folder / "sample-1" / "verify.jsonl"]
source_of: dict[tuple[str, str], int] = {}
for index, path in enumerate(sources, 1):
    for record in iter_records(path):
        if record.view == "dv":
            source_of.setdefault((str(record.parent_id), record.instruction), index)
kept = {r.id: r for r in iter_records(folder / "kept.jsonl")}
labels = {row["item"]: row for row in map(json.loads, labels_path.open())}


rows, controls = [], {}
for line in key_path.open():
    entry = json.loads(line)
    label = labels[entry["item"]]["label"]
    if entry["kind"] != "llm":
        c = controls.setdefault(entry["kind"], {"n": 0, "labels": {}})
        c["n"] += 1
        c["labels"][label] = c["labels"].get(label, 0) + 1
        continue
    record = kept[entry["record_id"]]
    source = source_of[(str(record.parent_id), record.instruction)]
    rows.append({"item": entry["item"], "instance": entry["instance"], "source": source, "label": label})
by_source = {}
for s in (1, 2):
    sel = [r for r in rows if r["source"] == s]
    by_source[s] = {"labels": {lab: sum(r["label"] == lab for r in sel) for lab in ("reversal", "near_copy", "other")},
                    "real": proportion(sum(r["label"] == "reversal" for r in sel), len(sel))}
table = [[by_source[s]["real"]["k"], by_source[s]["real"]["n"] - by_source[s]["real"]["k"]] for s in (1, 2)]
real = sum(r["label"] == "reversal" for r in rows)
result = {
    "plan": "docs/results/self-consistency-1p5b/plan.txt",
    "items": len(rows),
    "real_among_kept": proportion(real, len(rows)),
    "goal_met": len(rows) >= 40 and real / len(rows) >= 0.5,
    "by_source": {"greedy": by_source[1], "sampled": by_source[2]},
    "fisher_p_greedy_vs_sampled": round(float(fisher_exact(table).pvalue), 4),
    "controls": controls,
    "rows": rows,
}
out.write_text(json.dumps(result, indent=1) + "\n")
print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
