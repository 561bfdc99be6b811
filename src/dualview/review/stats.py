"""Statistics of a verdict file: inversion accuracy, failure modes, judge agreement.

``review_summary(path)`` is the one entry point for reports and dataset cards; it needs only
the verdict file, because every verdict line carries the item's stratum, the judge's verdict
and (gold mode) the expected label.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dualview.errors import DataError
from dualview.proportions import wilson_interval
from dualview.review.store import FAILURE_LABELS, FAILURE_MODES, latest_verdicts


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa of two raters' labels: (p_o - p_e) / (1 - p_e), with p_o the observed
    agreement and p_e the agreement expected from each rater's label frequencies.
    None for no pairs; 1.0 when both raters use one and the same label throughout."""
    if len(a) != len(b):
        raise ValueError("both raters must label the same items")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[label] * cb[label] for label in set(ca) | set(cb)) / (n * n)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - expected) / (1 - expected)


def confusion(
    rows: Sequence[Any], cols: Sequence[Any], labels: Iterable[Any]
) -> dict[str, dict[str, int]]:
    """Counts ``table[row][col]`` over paired labels, every label pair present (zeros too)."""
    keys = [str(x) for x in labels]
    table = {r: dict.fromkeys(keys, 0) for r in keys}
    for r, c in zip(rows, cols, strict=True):
        table[str(r)][str(c)] += 1
    return table


def proportion(successes: int, n: int) -> dict[str, Any]:
    """``{"k", "n", "rate", "ci95"}`` (rate and interval None when n is 0)."""
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "ci95": None}
    lo, hi = wilson_interval(successes, n)
    return {"k": successes, "n": n, "rate": successes / n, "ci95": [lo, hi]}


def _agreement(human: list[str], other: list[str]) -> dict[str, Any]:
    return {
        "n": len(human),
        "agreement": sum(h == o for h, o in zip(human, other, strict=True)) / len(human)
        if human
        else None,
        "kappa": cohen_kappa(human, other),
        # rows: the human's label; columns: the other rater's
        "confusion": confusion(human, other, ["valid", "invalid"]),
    }


def _inter_reviewer(verdicts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Kappa between the first two reviewers on the items both labelled."""
    by_reviewer: dict[str, dict[str, str]] = defaultdict(dict)
    for v in verdicts:
        by_reviewer[v["reviewer"]][v["item"]] = v["verdict"]
    names = sorted(by_reviewer)
    if len(names) < 2:
        return None
    first, second = by_reviewer[names[0]], by_reviewer[names[1]]
    shared = sorted(set(first) & set(second))
    if not shared:
        return None
    out = _agreement([first[i] for i in shared], [second[i] for i in shared])
    return {"reviewers": names[:2], **out}


def summarize(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """The statistics of a list of verdicts (one per reviewer and item)."""
    valid = [v for v in verdicts if v["verdict"] == "valid"]
    strata: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for v in verdicts:
        strata[str(v.get("stratum") or "all")].append(v)
    modes = Counter(
        str(v.get("failure_mode") or "unspecified") for v in verdicts if v["verdict"] == "invalid"
    )
    judged = [v for v in verdicts if v.get("judge") in ("valid", "invalid")]
    gold = [v for v in verdicts if v.get("expected") in ("valid", "invalid")]
    reviewers = Counter(v["reviewer"] for v in verdicts)
    return {
        "verdicts": len(verdicts),
        "items": len({v["item"] for v in verdicts}),
        "reviewers": dict(sorted(reviewers.items())),
        "accuracy": proportion(len(valid), len(verdicts)),
        "by_stratum": {
            s: proportion(sum(v["verdict"] == "valid" for v in vs), len(vs))
            for s, vs in sorted(strata.items())
        },
        "failure_modes": {m: modes[m] for m in [*FAILURE_MODES, "unspecified"] if modes[m]},
        "judge": _agreement([v["verdict"] for v in judged], [v["judge"] for v in judged])
        if judged
        else None,
        "judge_accuracy": proportion(sum(v["judge"] == "valid" for v in judged), len(judged))
        if judged
        else None,
        "gold": _agreement([v["verdict"] for v in gold], [v["expected"] for v in gold])
        | {"accuracy": proportion(sum(v["verdict"] == v["expected"] for v in gold), len(gold))}
        if gold
        else None,
        "inter_reviewer": _inter_reviewer(verdicts),
    }


def review_summary(verdicts_path: str | Path, reviewer: str | None = None) -> dict[str, Any]:
    """Statistics of a verdict file (latest verdict per reviewer and item), optionally of one
    reviewer only; see `summarize` for the keys."""
    verdicts = latest_verdicts(verdicts_path)
    if reviewer is not None:
        verdicts = [v for v in verdicts if v["reviewer"] == reviewer]
    return {"file": str(verdicts_path), **summarize(verdicts)}


def _pct(p: dict[str, Any] | None) -> str:
    if not p or p["rate"] is None:
        return "-"
    lo, hi = p["ci95"]
    return f"{100 * p['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({p['k']}/{p['n']})"


def _kappa(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _confusion_md(title: str, other: str, block: dict[str, Any]) -> list[str]:
    c = block["confusion"]
    return [
        f"**{title}**: n {block['n']}, agreement {100 * (block['agreement'] or 0):.1f}%, "
        f"Cohen's kappa {_kappa(block['kappa'])}",
        "",
        f"| human \\ {other} | valid | invalid |",
        "|---|---|---|",
        f"| valid | {c['valid']['valid']} | {c['valid']['invalid']} |",
        f"| invalid | {c['invalid']['valid']} | {c['invalid']['invalid']} |",
        "",
    ]


def markdown(summary: dict[str, Any]) -> str:
    """The summary as Markdown (what ``dualview review stats`` prints and reports embed)."""
    lines = [
        f"Verdicts: {summary['verdicts']} on {summary['items']} items by "
        + ", ".join(f"{r} ({n})" for r, n in summary["reviewers"].items()),
        "",
        "| measure | value (Wilson 95% CI) |",
        "|---|---|",
        f"| inversion accuracy (human) | {_pct(summary['accuracy'])} |",
    ]
    if summary["judge_accuracy"]:
        lines.append(f"| judge pass rate, same items | {_pct(summary['judge_accuracy'])} |")
    if summary["gold"]:
        lines.append(f"| reviewer accuracy on gold items | {_pct(summary['gold']['accuracy'])} |")
    for stratum, p in summary["by_stratum"].items():
        lines.append(f"| accuracy, {stratum} | {_pct(p)} |")
    lines.append("")
    if summary["failure_modes"]:
        lines += ["| failure mode | count |", "|---|---|"]
        lines += [
            f"| {FAILURE_LABELS.get(m, m)} | {n} |" for m, n in summary["failure_modes"].items()
        ]
        lines.append("")
    if summary["judge"]:
        lines += _confusion_md("Judge vs human", "judge", summary["judge"])
    if summary["gold"]:
        lines += _confusion_md("Reviewer vs gold label", "gold", summary["gold"])
    if summary["inter_reviewer"]:
        a, b = summary["inter_reviewer"]["reviewers"]
        lines += _confusion_md(f"Reviewer {a} vs {b}", b, summary["inter_reviewer"])
    return "\n".join(lines).rstrip() + "\n"


def report_sections(
    verdict_files: Sequence[Path] | None, run_dirs: Sequence[Path] = ()
) -> list[tuple[str, str]]:
    """``(heading, markdown)`` report sections, one per verdict file: the files given, else
    each run folder's ``review.jsonl`` (where ``dualview review RUN`` writes) that exists."""
    files = list(verdict_files or [Path(d) / "review.jsonl" for d in run_dirs])
    files = [f for f in files if verdict_files or Path(f).is_file()]
    for given in verdict_files or []:  # a file named on purpose must exist (no empty section)
        if not Path(given).exists():
            raise DataError(given, None, "file", "does not exist (a verdict file of review)")
    return [(f"Human review ({Path(f).name})", markdown(review_summary(f))) for f in files]


def card_review_fields(summary: dict[str, Any]) -> dict[str, Any]:
    """A `review_summary` in the flat form a dataset card shows: ``accuracy`` (the rate),
    ``ci_low``/``ci_high`` (its Wilson 95% interval), ``n`` (verdicts), plus ``items``,
    ``reviewers`` and ``file`` when present."""
    accuracy = summary.get("accuracy") or {}
    ci = accuracy.get("ci95") or [None, None]
    flat = {"accuracy": accuracy.get("rate"), "ci_low": ci[0], "ci_high": ci[1]}
    flat["n"] = accuracy.get("n")
    for key in ("items", "reviewers", "file"):
        if key in summary:
            flat[key] = summary[key]
    return flat
