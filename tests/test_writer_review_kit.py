"""``benchmarks/writer_review_kit.py``: a blind kit of LLM reversals with gold controls, and
the scoring of its labels by ``dualview review stats``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from dualview.cli import app
from dualview.data.gold import GOLD_DIR, load_gold
from dualview.data.gold_pairs import gold_pairs
from dualview.io.atomic import write_jsonl
from dualview.review.items import load_review_set
from dualview.synth.bench import select_pairs

SCRIPT = "benchmarks/writer_review_kit.py"
ITEM_FIELDS = {"item", "query", "original_instruction", "candidate_reversal", "p_plus", "n_star"}


def fake_accepted(path: Path, n: int) -> dict[str, str]:
    """``n`` writer-like accepted reversals of gold train instances; returns id -> text."""
    records, texts = [], {}
    # round-robin over the domains, as bench-synth takes them
    for orig, dv in select_pairs(gold_pairs(load_gold("train", GOLD_DIR)), n):
        text = f"Writer's reversal number {len(records)}: only the other side, please."
        meta = {"orig_instruction": orig.instruction, "orig_positive_id": orig.positives[0].id}
        records.append(
            dv.model_copy(
                update={"id": f"{orig.id}-dv", "instruction": text, "meta": meta},
            )
        )
        texts[orig.id] = text
    write_jsonl(path, records)
    return texts


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def run(*args: str) -> None:
    done = script(*args)
    assert done.returncode == 0, done.stderr


def built_kit(tmp_path: Path) -> Path:
    """A kit (``tmp_path/kit``, key in ``tmp_path/key``) of 45 accepted fake reversals; returns
    the accepted file."""
    accepted = tmp_path / "accepted.jsonl"
    fake_accepted(accepted, 45)
    run("build", str(accepted), str(tmp_path / "kit"), str(tmp_path / "key"))
    return accepted


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_kit_is_blind_mixed_and_deterministic(tmp_path: Path) -> None:
    accepted = tmp_path / "accepted.jsonl"
    texts = fake_accepted(accepted, 60)
    run("build", str(accepted), str(tmp_path / "kit"), str(tmp_path / "key"))
    run("build", str(accepted), str(tmp_path / "kit2"), str(tmp_path / "key2"))
    items, key = read(tmp_path / "kit" / "items.jsonl"), read(tmp_path / "key" / "key.jsonl")
    assert (tmp_path / "kit" / "items.jsonl").read_text() == (
        tmp_path / "kit2" / "items.jsonl"
    ).read_text()
    assert [i["item"] for i in items] == list(range(1, 61)) == [k["item"] for k in key]
    assert Counter(k["kind"] for k in key) == {
        "llm": 40,
        "gold_reversal": 10,
        "original_as_reversal": 10,
    }
    # 60 distinct instances: no query shown twice; the LLM items stratified over the domains
    # (6 accepted in each of the 10 domains: 4 of each).
    assert len({k["instance"] for k in key}) == 60 == len({i["query"] for i in items})
    assert set(Counter(k["domain"] for k in key if k["kind"] == "llm").values()) == {4}
    pairs = {o.meta["instance"]: (o, dv) for o, dv in gold_pairs(load_gold("train", GOLD_DIR))}
    kit_text = (tmp_path / "kit" / "items.jsonl").read_text()
    for item, entry in zip(items, key, strict=True):
        assert set(item) == ITEM_FIELDS
        orig, dv = pairs[entry["instance"]]
        expected = {
            "llm": texts.get(orig.id),
            "gold_reversal": dv.instruction,
            "original_as_reversal": orig.instruction,
        }[entry["kind"]]
        assert item["candidate_reversal"] == expected
        assert item["original_instruction"] == orig.instruction
        assert item["n_star"]["text"][:50] == dv.positives[0].text[:50]
        assert item["p_plus"]["text"][:50] == orig.positives[0].text[:50]
        assert len(item["p_plus"]["text"]) <= 602 and len(item["n_star"]["text"]) <= 602
        assert entry["instance"] not in kit_text and entry["record_id"] not in kit_text
    # The kinds are not in a block: the shuffle mixes them.
    assert len({k["kind"] for k in key[:15]}) > 1
    # The review page reads the kit's records, with opaque ids.
    review = load_review_set(str(tmp_path / "kit" / "records.jsonl"), 60, 0, "none")
    assert {i.id for i in review.items} == {k["review_id"] for k in key}
    assert all(i.p_plus is not None and i.stratum == "all" for i in review.items)


def test_scored_labels_give_review_stats_per_kind(tmp_path: Path) -> None:
    built_kit(tmp_path)
    key = read(tmp_path / "key" / "key.jsonl")
    # A reviewer who calls every gold reversal and the first 10 LLM items a reversal, the
    # controls near-copies and the other LLM items "other".
    llm = [k["item"] for k in key if k["kind"] == "llm"]
    labels = [
        {
            "item": k["item"],
            "label": "reversal"
            if k["kind"] == "gold_reversal" or k["item"] in llm[:10]
            else "near_copy"
            if k["kind"] == "original_as_reversal"
            else "other",
        }
        for k in key
    ]
    write_jsonl(tmp_path / "labels.jsonl", labels)
    scored = tmp_path / "scored.jsonl"
    run("score", str(tmp_path / "labels.jsonl"), str(tmp_path / "key" / "key.jsonl"), str(scored))
    result = CliRunner().invoke(
        app, ["review", "stats", str(scored), "--out", str(tmp_path / "s.json")]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["by_stratum"]["llm"]["k"] == 10 and summary["by_stratum"]["llm"]["n"] == 40
    assert summary["gold"]["accuracy"]["k"] == 20 == summary["gold"]["accuracy"]["n"]
    assert summary["failure_modes"] == {"near_copy": 10, "other": 30}


def test_score_rejects_an_unknown_label(tmp_path: Path) -> None:
    built_kit(tmp_path)
    write_jsonl(tmp_path / "labels.jsonl", [{"item": 1, "label": "maybe"}])
    key = tmp_path / "key" / "key.jsonl"
    done = script("score", str(tmp_path / "labels.jsonl"), str(key), str(tmp_path / "out.jsonl"))
    assert done.returncode != 0 and "label" in done.stderr


def test_score_refuses_to_write_over_its_labels_or_key(tmp_path: Path) -> None:
    built_kit(tmp_path)
    labels, key = tmp_path / "labels.jsonl", tmp_path / "key" / "key.jsonl"
    write_jsonl(labels, [{"item": 1, "label": "reversal"}])
    before = {path: path.read_bytes() for path in (labels, key)}
    for out in (labels, key):
        done = script("score", str(labels), str(key), str(out))
        assert done.returncode != 0 and "output" in done.stderr
    assert {path: path.read_bytes() for path in (labels, key)} == before


def _judge_fixture(tmp_path: Path) -> tuple[list[dict], list[int], Path]:
    """A kit of 40 LLM items, labels (the first 10 LLM items real), and the items a judge keeps:
    5 real and 5 not."""
    accepted = built_kit(tmp_path)
    key = read(tmp_path / "key" / "key.jsonl")
    llm = [k["item"] for k in key if k["kind"] == "llm"]
    labels = [
        {"item": k["item"], "label": "reversal" if k["item"] in llm[:10] else "other"} for k in key
    ]
    write_jsonl(tmp_path / "labels.jsonl", labels)
    return key, llm[:5] + llm[20:25], accepted


def _write_verify(out: Path, kept: list, dropped_ids: list[str]) -> None:
    write_jsonl(out, kept)
    lines = [{"id": i, "status": "rejected"} for i in dropped_ids]
    write_jsonl(out.with_name(out.name + ".dropped.jsonl"), lines)


def _judge_score(tmp_path: Path, verify: Path, *extra: str) -> dict:
    out = tmp_path / "judge.json"
    key_file = tmp_path / "key" / "key.jsonl"
    run("judge-score", str(tmp_path / "labels.jsonl"), str(key_file), str(verify), str(out), *extra)
    return json.loads(out.read_text())


def test_judge_score_joins_a_judge_input_run_with_the_labels(tmp_path: Path) -> None:
    key, kept_items, _ = _judge_fixture(tmp_path)
    records = {r["id"]: r for r in read(tmp_path / "kit" / "records.jsonl")}
    kept = {k["review_id"] for k in key if k["item"] in kept_items or k["kind"] == "gold_reversal"}
    verify = tmp_path / "verify" / "kept.jsonl"
    verify.parent.mkdir()
    _write_verify(verify, [records[i] for i in sorted(kept)], sorted(set(records) - kept))
    result = _judge_score(tmp_path, verify)
    assert result["llm_accepted_real_reversals"]["k"] == 5
    assert result["llm_accepted_real_reversals"]["n"] == 10
    assert result["llm_real_reversals_without_judge"]["k"] == 10
    accepted = result["accepted_by_judge"]
    assert (accepted["gold_reversal"]["k"], accepted["gold_reversal"]["n"]) == (10, 10)
    assert accepted["original_as_reversal"]["k"] == 0
    assert (accepted["reversal"]["k"], accepted["other"]["k"]) == (5, 5)


def test_judge_score_by_record_joins_the_pipelines_verify_stage(tmp_path: Path) -> None:
    key, kept_items, accepted = _judge_fixture(tmp_path)
    parent = {r["id"]: r["parent_id"] for r in read(accepted)}
    origs = {o.id: o for o, _ in gold_pairs(load_gold("train", GOLD_DIR))}
    kept_units = {parent[k["record_id"]] for k in key if k["item"] in kept_items}
    # The pipeline judged every accepted reversal (45, the kit shows 40); controls were not.
    verify = tmp_path / "verify" / "kept.jsonl"
    verify.parent.mkdir()
    _write_verify(
        verify,
        [origs[i] for i in sorted(kept_units)],
        sorted(set(parent.values()) - kept_units),
    )
    result = _judge_score(tmp_path, verify, "--by-record")
    assert result["llm_accepted_real_reversals"]["k"] == 5
    assert result["llm_accepted_real_reversals"]["n"] == 10
    assert set(result["accepted_by_judge"]) == {"reversal", "other"}
    # Without --by-record the same run does not hold the kit's items: a clear error.
    labels, key = tmp_path / "labels.jsonl", tmp_path / "key" / "key.jsonl"
    done = script("judge-score", str(labels), str(key), str(verify), str(tmp_path / "j2.json"))
    assert done.returncode != 0 and "not judged" in done.stderr
