"""A blind review kit of an LLM writer's accepted reversals, with gold controls (issue 36).

``build`` mixes a seeded sample of the writer's accepted reversals (a ``dualview bench-synth``
``shots-N/reverse.jsonl``, stratified over the domains with `dualview.review.sample`) with two
kinds of controls whose right label is known, each on gold train instances that are not in
the LLM sample and not in the other control (so no query is shown twice):

- ``gold_reversal``: the hand-written gold reversal (expected: ``reversal``);
- ``original_as_reversal``: the original instruction posing as the reversal (expected: not a
  reversal; it is the original's intent word for word).

The items are shuffled with a fixed seed and numbered. Written to KIT (for the reviewer):
``items.jsonl`` (per item only: number, query, original instruction, candidate reversal, P+
and N*, each passage cut to ``--chars``), ``records.jsonl`` (the same items as dv records with
opaque ids ``item-NN`` for the review page: ``dualview review KIT/records.jsonl --size 60
--stratify none``) and ``INSTRUCTIONS.md``; to KEY (kept from the reviewer): ``key.jsonl``
(item -> kind, gold instance, record id, expected label).

``score`` turns the reviewer's labels into `dualview.review.store` verdict lines that carry
the key's kind as the stratum and the expected verdict of the controls, so that
``dualview review stats SCORED`` gives the LLM reversals' inversion accuracy (stratum
``llm``, Wilson 95% interval) and the reviewer's accuracy on the 20 controls. LABELS is a
JSONL of ``{"item": 7, "label": "reversal" | "near_copy" | "other", "note": "..."}``, or the
page's verdict file (``item-NN`` ids, ``valid``/``invalid``).

``judge-input`` rebuilds the kit's items from the key as judge units, whole passages (not
cut): each a dv record alone, the candidate as its instruction with N* its positive and P+ its
instruction negative, carrying the original instruction, so ``dualview verify`` judges both
scenarios (N* must win under the candidate, P+ under the original). ``judge-score`` joins
the verify run's kept and dropped items with the reviewer's labels: how often the judge
accepts each kind of item, and the share of real reversals among the LLM items it accepts
(Wilson 95%), which is what a judge filtering a writer's output is for. With
``--by-record`` VERIFY_OUT is instead the verify stage of the ``dualview run`` whose writer
output the kit was built from (its units are the gold originals; only the LLM items count).

Usage:
  python benchmarks/writer_review_kit.py build ACCEPTED.jsonl KIT KEY [--seed 0] [--llm 40]
      [--gold 10] [--control 10] [--chars 600]
  python benchmarks/writer_review_kit.py score LABELS KEY/key.jsonl SCORED.jsonl
      [--reviewer NAME]
  python benchmarks/writer_review_kit.py judge-input KEY UNITS.jsonl
  python benchmarks/writer_review_kit.py judge-score LABELS KEY/key.jsonl VERIFY_OUT.jsonl
      RESULT.json [--by-record]
"""

from __future__ import annotations

import argparse
import json
import random
import time
import uuid
from pathlib import Path
from typing import Any

from dualview.data.gold import GOLD_DIR, load_gold
from dualview.data.gold_pairs import GoldPair, gold_pairs
from dualview.data.jsonl import iter_records
from dualview.data.schema import Document, Record
from dualview.errors import DataError
from dualview.io.atomic import atomic_write_text
from dualview.io.paths import check_outputs
from dualview.review.sample import stratified_sample
from dualview.review.stats import proportion
from dualview.review.store import check_reviewer

LABELS = ("reversal", "near_copy", "other")
EXPECTED = {"llm": None, "gold_reversal": "valid", "original_as_reversal": "invalid"}

INSTRUCTIONS = """# Blind review: is the candidate a real polarity reversal?

Each line of `items.jsonl` is one item: a search `query`, the user's `original_instruction`,
a `candidate_reversal`, and two passages: `p_plus` (relevant under the original instruction)
and `n_star` (not relevant under the original instruction, but on the query's topic).
Passages are cut to about {chars} characters.

Question: **under the candidate instruction, does N* become relevant and P+ not?**

Label each item with exactly one of:

- `reversal`: a real reversal: a user with the candidate instruction would want N* and not
  P+ (wording, length and style do not matter; a natural request is enough).
- `near_copy`: the same intent as the original (a paraphrase, a reordering, a narrower or
  wider version of the same wish): P+ stays the relevant passage.
- `other`: neither: off-topic, a passage or answer instead of an instruction, contradictory
  or unintelligible, or a change that makes neither or both passages relevant.

Add an optional short `note` (why, in a few words) where the choice was not obvious.

Write one JSON line per item to a labels file, e.g.
`{{"item": 7, "label": "near_copy", "note": "still asks for undergraduates"}}`.
Judge each item on its own; items come from different sources in a random order. Do not look
for the key.

(Alternatively, on the review page: `dualview review records.jsonl --size {n} --stratify none
--reviewer NAME --verdicts verdicts.jsonl`; there `valid` = reversal, `invalid` with failure
mode `near-copy of the original` = near_copy, any other invalid = other.)
"""


def cut(text: str, chars: int) -> str:
    """``text`` cut at a word boundary to at most ``chars`` characters, marked with an ellipsis."""
    if len(text) <= chars:
        return text
    head = text[:chars].rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + " …"


def _domain(record: Record) -> str:
    return str(record.meta.get("domain") or "")


def _passage(doc: Document, chars: int) -> dict[str, str]:
    return {"title": doc.title or "", "text": cut(doc.text, chars)}


def _pick(pool: list[GoldPair], n: int, seed: int) -> list[GoldPair]:
    """``n`` pairs of ``pool`` stratified over the domains, in the pool's order."""
    if n > len(pool):
        raise DataError("gold:train", None, "instances", f"{n} wanted, {len(pool)} left")
    picked = stratified_sample([_domain(o) for o, _ in pool], n, seed)
    return [pool[i] for i in sorted(picked)]


def item_record(opaque: str, pair: GoldPair, candidate: str, chars: int | None) -> dict[str, Any]:
    """One item as a dv record alone (see the module docstring), its passages cut to
    ``chars`` (whole when None)."""
    orig, dv = pair
    p_plus, n_star = orig.positives[0], dv.positives[0]
    if chars is not None:
        p_plus = p_plus.model_copy(update={"text": cut(p_plus.text, chars)})
        n_star = n_star.model_copy(update={"text": cut(n_star.text, chars)})
    record = Record(
        id=opaque,
        parent_id=f"{opaque}-orig",
        view="dv",
        query=orig.query,
        instruction=candidate,
        positives=[n_star],
        instruction_negatives=[p_plus],
        meta={"orig_instruction": orig.instruction, "orig_positive_id": p_plus.id},
    )
    return record.model_dump(mode="json", exclude_none=True)


def build(args: argparse.Namespace) -> None:
    pairs = {orig.id: (orig, dv) for orig, dv in gold_pairs(load_gold("train", args.gold_dir))}
    accepted = [r for r in iter_records(args.accepted) if r.view == "dv" and r.parent_id]
    unknown = [r.parent_id for r in accepted if r.parent_id not in pairs]
    if unknown:
        raise DataError(args.accepted, None, "parent_id", f"not a gold train orig: {unknown[0]}")
    if len(accepted) < args.llm:
        raise DataError(args.accepted, None, "records", f"{len(accepted)} < {args.llm} wanted")
    domains = [_domain(pairs[str(r.parent_id)][0]) for r in accepted]
    # distinct seeds per sample (stratified_sample seeds each domain with "SEED:DOMAIN")
    llm = [accepted[i] for i in sorted(stratified_sample(domains, args.llm, args.seed))]
    used = {r.parent_id for r in llm}
    pool = [p for i, p in pairs.items() if i not in used]
    gold = _pick(pool, args.gold, args.seed + 1000)
    used |= {o.id for o, _ in gold}
    control = _pick([p for p in pool if p[0].id not in used], args.control, args.seed + 2000)

    # (kind, gold pair, candidate instruction, the record the candidate comes from)
    rows: list[tuple[str, GoldPair, str, str]] = [
        ("llm", pairs[str(r.parent_id)], r.instruction, r.id) for r in llm
    ]
    rows += [("gold_reversal", (o, dv), dv.instruction, dv.id) for o, dv in gold]
    rows += [("original_as_reversal", (o, dv), o.instruction, o.id) for o, dv in control]
    random.Random(f"{args.seed}:review-kit-order").shuffle(rows)

    items, records, key = [], [], []
    for number, (kind, (orig, dv), candidate, source_id) in enumerate(rows, 1):
        p_plus, n_star = orig.positives[0], dv.positives[0]
        items.append(
            {
                "item": number,
                "query": orig.query,
                "original_instruction": orig.instruction,
                "candidate_reversal": candidate,
                "p_plus": _passage(p_plus, args.chars),
                "n_star": _passage(n_star, args.chars),
            }
        )
        opaque = f"item-{number:02d}"
        records.append(item_record(opaque, (orig, dv), candidate, args.chars))
        key.append(
            {
                "item": number,
                "review_id": opaque,
                "kind": kind,
                "instance": orig.meta.get("instance"),
                "domain": _domain(orig),
                "record_id": source_id,
                "expected": EXPECTED[kind],
            }
        )
    args.kit.mkdir(parents=True, exist_ok=True)
    args.key.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.kit / "items.jsonl", _jsonl(items))
    atomic_write_text(args.kit / "records.jsonl", _jsonl(records))
    text = INSTRUCTIONS.format(chars=args.chars, n=len(items))
    atomic_write_text(args.kit / "INSTRUCTIONS.md", text)
    meta = {
        "accepted": str(args.accepted),
        "accepted_records": len(accepted),
        "seed": args.seed,
        "counts": {"llm": len(llm), "gold_reversal": len(gold), "control": len(control)},
    }
    atomic_write_text(args.key / "key.jsonl", _jsonl(key))
    atomic_write_text(args.key / "kit.json", json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta))


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _verdict(row: dict[str, Any], where: str) -> tuple[str, str | None]:
    """(verdict, failure mode) of a label line or a page verdict line."""
    if "label" in row:
        if row["label"] not in LABELS:
            raise DataError(where, None, "label", f"must be one of {LABELS}")
        if row["label"] == "reversal":
            return "valid", None
        return "invalid", "near_copy" if row["label"] == "near_copy" else "other"
    if row.get("verdict") not in ("valid", "invalid"):
        raise DataError(where, None, "label", "neither a label nor a valid/invalid verdict")
    return row["verdict"], row.get("failure_mode") if row["verdict"] == "invalid" else None


def score(args: argparse.Namespace) -> None:
    key = {}
    for line in args.key_file.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        key[entry["item"]] = key[entry["review_id"]] = entry
    scored, seen = [], set()
    lines = args.labels.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        row = json.loads(line)
        where = f"{args.labels}:{number}"
        entry = key.get(row.get("item"))
        if entry is None:
            raise DataError(args.labels, number, "item", f"{row.get('item')!r} not in the key")
        verdict, mode = _verdict(row, where)
        reviewer = check_reviewer(str(row.get("reviewer") or args.reviewer))
        seen.add(entry["item"])
        scored.append(
            {
                "verdict_id": row.get("verdict_id") or uuid.uuid4().hex,
                "time": row.get("time") or round(time.time(), 3),
                "reviewer": reviewer,
                "verdict": verdict,
                "failure_mode": mode,
                "note": str(row.get("note") or ""),
                "item": entry["review_id"],
                "stratum": entry["kind"],
                "judge": None,
                "expected": entry["expected"],
            }
        )
    missing = sorted(set(e["item"] for e in key.values()) - seen)
    atomic_write_text(args.out, _jsonl(scored))
    print(f"{len(scored)} verdicts -> {args.out}; unlabelled items: {missing or 'none'}")


def judge_input(args: argparse.Namespace) -> None:
    """The kit's items as judge units, rebuilt from KEY (key.jsonl, kit.json)."""
    meta = json.loads((args.key / "kit.json").read_text(encoding="utf-8"))
    accepted = {r.id: r for r in iter_records(Path(meta["accepted"]))}
    pairs = {orig.id: (orig, dv) for orig, dv in gold_pairs(load_gold("train", GOLD_DIR))}
    by_instance = {str(o.meta.get("instance")): (o, dv) for o, dv in pairs.values()}
    units = []
    for line in (args.key / "key.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        orig, dv = by_instance[entry["instance"]]
        if entry["kind"] == "llm":
            candidate = accepted[entry["record_id"]].instruction
        else:
            candidate = dv.instruction if entry["kind"] == "gold_reversal" else orig.instruction
        units.append(item_record(entry["review_id"], (orig, dv), candidate, None))
    atomic_write_text(args.out, _jsonl(units))
    print(f"{len(units)} judge units -> {args.out}")


def _unit_ids(key: list[dict[str, Any]], key_file: Path, by_record: bool) -> dict[str, str]:
    """Review id -> the id of its judge unit in the verify run.

    A ``judge-input`` run judges the kit's items under their review ids. With ``by_record``
    the verify run is the pipeline's own (``dualview run``'s verify stage over the writer's
    output): there a unit is the gold original the reversal came from, and only the LLM items
    were judged.
    """
    if not by_record:
        return {e["review_id"]: e["review_id"] for e in key}
    meta = json.loads((key_file.parent / "kit.json").read_text(encoding="utf-8"))
    parents = {r.id: str(r.parent_id) for r in iter_records(Path(meta["accepted"]))}
    return {e["review_id"]: parents[e["record_id"]] for e in key if e["kind"] == "llm"}


def judge_score(args: argparse.Namespace) -> None:
    """How the judge's verdicts on the items meet the reviewer's labels (and the controls')."""
    key = [json.loads(x) for x in args.key_file.read_text(encoding="utf-8").splitlines()]
    units = _unit_ids(key, args.key_file, args.by_record)
    key = [e for e in key if e["review_id"] in units]
    rows = [
        json.loads(x) for x in args.labels.read_text(encoding="utf-8").splitlines() if x.strip()
    ]
    labels = {row["item"]: row["label"] for row in rows}
    kept = {r.id for r in iter_records(args.verify_out)}
    dropped_file = args.verify_out.with_name(args.verify_out.name + ".dropped.jsonl")
    lines = [json.loads(x) for x in dropped_file.read_text().splitlines() if x.strip()]
    dropped = {x["id"] for x in lines if x["status"] == "rejected"}  # errors: not judged
    missing = [unit for unit in units.values() if unit not in kept | dropped]
    if missing:
        raise DataError(args.verify_out, None, "unit", f"not judged: {', '.join(missing[:5])}")
    accepted = {e["item"]: units[e["review_id"]] in kept for e in key}
    groups: dict[str, list[bool]] = {}
    for entry in key:
        label = labels[entry["item"]] if entry["kind"] == "llm" else entry["kind"]
        groups.setdefault(label, []).append(accepted[entry["item"]])
    accepted_llm = [labels[e["item"]] for e in key if e["kind"] == "llm" and accepted[e["item"]]]
    result = {
        "verify_out": str(args.verify_out),
        "accepted_by_judge": {g: proportion(sum(v), len(v)) for g, v in sorted(groups.items())},
        "llm_accepted_real_reversals": proportion(
            accepted_llm.count("reversal"), len(accepted_llm)
        ),
        "llm_real_reversals_without_judge": proportion(
            sum(labels[e["item"]] == "reversal" for e in key if e["kind"] == "llm"),
            sum(e["kind"] == "llm" for e in key),
        ),
    }
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("accepted", type=Path)
    b.add_argument("kit", type=Path)
    b.add_argument("key", type=Path)
    b.add_argument("--gold-dir", type=Path, default=GOLD_DIR)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--llm", type=int, default=40)
    b.add_argument("--gold", type=int, default=10)
    b.add_argument("--control", type=int, default=10)
    b.add_argument("--chars", type=int, default=600)
    s = sub.add_parser("score")
    s.add_argument("labels", type=Path)
    s.add_argument("key_file", type=Path)
    s.add_argument("out", type=Path)
    s.add_argument("--reviewer", default="reviewer")
    j = sub.add_parser("judge-input")
    j.add_argument("key", type=Path)
    j.add_argument("out", type=Path)
    js = sub.add_parser("judge-score")
    js.add_argument("labels", type=Path)
    js.add_argument("key_file", type=Path)
    js.add_argument("verify_out", type=Path)
    js.add_argument("out", type=Path)
    js.add_argument(
        "--by-record",
        action="store_true",
        help="VERIFY_OUT is the pipeline's verify stage over the writer's output, not a "
        "judge-input run: join by the gold original each LLM item came from",
    )
    args = parser.parse_args()
    if args.command == "build" and args.kit.resolve() == args.key.resolve():
        parser.error("KIT and KEY must be different folders (the key stays hidden)")
    try:  # no output may be an input: a reader never writes what it reads
        if args.command == "build":
            check_outputs([args.kit, args.key], [args.accepted, args.gold_dir], replaced=False)
        elif args.command == "judge-input":
            check_outputs([args.out], [args.key])
        elif args.command == "judge-score":
            check_outputs([args.out], [args.labels, args.key_file, args.verify_out])
        else:
            check_outputs([args.out], [args.labels, args.key_file])
    except DataError as exc:
        parser.error(str(exc))
    commands = {"build": build, "score": score, "judge-input": judge_input}
    commands["judge-score"] = judge_score
    commands[args.command](args)


if __name__ == "__main__":
    main()
