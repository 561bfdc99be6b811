"""Small self-made dual-view files for the review tests (passages carry hostile markup)."""

from __future__ import annotations

import json
from pathlib import Path

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


def doc(i: str, text: str) -> dict:
    return {"id": i, "title": f"title {i}", "text": text}


def dv_record(n: int, domain: str, hostile: bool = False) -> dict:
    """An orig-less dual view as ``dualview synth`` writes it (orig instruction in meta)."""
    p_plus = doc(f"p{n}", f"passage P+ {n} " + (HOSTILE if hostile else "plain text"))
    n_star = doc(f"n{n}", f"passage N* {n} about the other reading")
    other = doc(f"o{n}", f"another negative {n}")
    return {
        "id": f"r{n}-dv",
        "parent_id": f"r{n}",
        "view": "dv",
        "query": f"query {n}" + (" </textarea><b>bold</b>" if hostile else ""),
        "instruction": f"reversed instruction {n}",
        "positives": [n_star],
        "instruction_negatives": [p_plus, other],
        "hard_negatives": [doc(f"h{n}", f"hard {n}")],
        "meta": {
            "domain": domain,
            "orig_instruction": f"original instruction {n}",
            "orig_positive_id": f"p{n}",
        },
    }


def write_dv_file(path: Path, sizes: dict[str, int], hostile_first: bool = True) -> Path:
    """``sizes[domain]`` dual views per domain, domains interleaved; the first is hostile."""
    rows, n = [], 0
    for domain, size in sizes.items():
        for _ in range(size):
            rows.append(dv_record(n, domain, hostile=hostile_first and n == 0))
            n += 1
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_judge(dv_file: Path, kept_ids: list[str], rejected_ids: list[str]) -> Path:
    """A ``dualview verify`` output: kept records in the file, rejections in .dropped.jsonl."""
    rows = {json.loads(line)["id"]: line for line in dv_file.read_text().splitlines()}
    kept = dv_file.with_name("verified.jsonl")
    kept.write_text("".join(rows[i] + "\n" for i in kept_ids), encoding="utf-8")
    dropped = kept.with_name(kept.name + ".dropped.jsonl")
    dropped.write_text(
        "".join(
            json.dumps({"id": i, "unit_ids": [i], "status": "rejected", "reason": "dv: picked"})
            + "\n"
            for i in rejected_ids
        ),
        encoding="utf-8",
    )
    return kept
