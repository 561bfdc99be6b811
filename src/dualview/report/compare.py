"""Which configurations a report compares, and the significance table it prints.

Pairs are ``(arm, control)`` row names. Given none, the default is every trained arm
against ``Ins-orig`` (when that row exists) and every arm against each ``base`` row. Each
pair is compared on every column whose per-query values both rows have
(`dualview.report.significance.compare`), Holm-corrected per column when a column
has several comparisons.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from dualview.errors import DualviewError
from dualview.report.significance import (
    DEFAULT_RESAMPLES,
    PairedComparison,
    apply_holm,
    compare,
)
from dualview.report.table import ConfigResult, ordered_columns

DEFAULT_CONTROL = "Ins-orig"


def is_base(name: str) -> bool:
    """Rows of untrained models are named ``base`` or ``base (<backbone>)``."""
    return name == "base" or name.startswith("base (")


def default_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Every trained arm vs ``Ins-orig`` (if present), then every arm vs each base row."""
    bases = [n for n in names if is_base(n)]
    arms = [n for n in names if not is_base(n)]
    pairs = [(a, DEFAULT_CONTROL) for a in arms if DEFAULT_CONTROL in arms and a != DEFAULT_CONTROL]
    pairs += [(a, b) for b in bases for a in arms]
    return pairs


def parse_pair(text: str) -> tuple[str, str]:
    """``"Ins-DV-gold:Ins-orig"`` -> ``("Ins-DV-gold", "Ins-orig")``."""
    arm, sep, control = text.partition(":")
    if not sep or not arm.strip() or not control.strip():
        raise DualviewError(f"comparison {text!r}: expected ARM:CONTROL (two row names)")
    return arm.strip(), control.strip()


def _resplit(pair: tuple[str, str], names: Sequence[str]) -> tuple[str, str]:
    """``pair`` as `parse_pair` split it at its first colon, or split at the one colon where
    both sides name rows: row names hold colons (``X@embedded:minilm``, ``embedded:minilm``)."""
    if pair[0] in names and pair[1] in names:
        return pair
    text = f"{pair[0]}:{pair[1]}"
    splits = [(text[:i].strip(), text[i + 1 :].strip()) for i, c in enumerate(text) if c == ":"]
    matches = [split for split in splits if split[0] in names and split[1] in names]
    return matches[0] if len(matches) == 1 else pair


def check_pairs(pairs: Sequence[tuple[str, str]], names: Sequence[str]) -> list[tuple[str, str]]:
    """``pairs`` with each name checked against ``names`` (a pair re-split where a row name
    holds a colon, `_resplit`)."""
    checked = [_resplit(pair, names) for pair in pairs]
    for arm, control in checked:
        for name in (arm, control):
            if name not in names:
                raise DualviewError(
                    f"comparison {arm}:{control}: no configuration {name!r} "
                    f"(the report has {', '.join(names)})"
                )
    return checked


def chosen_pairs(
    rows: list[ConfigResult], pairs: Sequence[tuple[str, str]] | None
) -> list[tuple[str, str]]:
    """``pairs``, or `default_pairs` when ``None``; each name checked against ``rows``."""
    names = [row.name for row in rows]
    return check_pairs(default_pairs(names) if pairs is None else list(pairs), names)


def compare_rows(
    rows: list[ConfigResult],
    pairs: Sequence[tuple[str, str]] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> list[PairedComparison]:
    """Paired comparisons of ``pairs`` (default `default_pairs`) on every column with
    per-query values, column by column in table order, Holm-corrected per column."""
    by_name = {row.name: row for row in rows}
    pairs = chosen_pairs(rows, pairs)
    out: list[PairedComparison] = []
    for column in ordered_columns(rows):
        for arm, control in pairs:
            a, c = by_name[arm].query_values.get(column), by_name[control].query_values.get(column)
            if not a or not c:
                continue
            comp = compare(column, arm, control, a, c, n_resamples=n_resamples, seed=seed)
            if comp is not None:
                out.append(comp)
    apply_holm(out)
    return out


def untested_metrics(
    rows: list[ConfigResult],
    comparisons: list[PairedComparison],
    pairs: Sequence[tuple[str, str]] | None = None,
) -> dict[str, str]:
    """The table's columns that got no paired comparison although the report compares
    ``pairs`` (default `default_pairs`), each with why, in table order."""
    pairs = chosen_pairs(rows, pairs)
    if not pairs:
        return {}
    tested = {c.metric for c in comparisons}
    return {
        column: _why_untested(column, rows, pairs)
        for column in ordered_columns(rows)
        if column not in tested
    }


def _why_untested(column: str, rows: list[ConfigResult], pairs: list[tuple[str, str]]) -> str:
    by_name = {row.name: row for row in rows}
    compared = [by_name[name] for pair in pairs for name in pair]
    notes = [row.query_notes[column] for row in compared if column in row.query_notes]
    if notes:
        return "; ".join(dict.fromkeys(notes))
    if any(all(column in by_name[n].query_values for n in pair) for pair in pairs):
        return "the compared configurations share no query"
    return "no compared pair of configurations has it on both sides"


def _p(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def significance_markdown(
    comparisons: list[PairedComparison], runs: int = 1, untested: dict[str, str] | None = None
) -> str:
    """The significance section: how it was tested, then `significance_table`, then the
    metrics of the table left untested and why (`untested_metrics`)."""
    if not comparisons and not untested:
        return ""
    lines = ["### Paired significance (arm - control)", ""]
    if comparisons:
        holm = any(c.p_holm is not None for c in comparisons)
        pooled = f", a query's values over {runs} runs (seeds) averaged first" if runs > 1 else ""
        lines += [
            "Per-query differences; 95% percentile-bootstrap CI of the mean difference; "
            f"two-sided paired randomization (sign-flip) test{pooled}. "
            + ("p (Holm): Holm-corrected over the comparisons of each metric. " if holm else "")
            + "`*` = p < 0.05"
            + (" after correction." if holm else "."),
            "",
            significance_table(comparisons),
        ]
    if untested:
        lines.append("Not tested (no paired statistics):")
        lines += [f"- `{column}`: {why}." for column, why in untested.items()]
    return "\n".join(lines) + ("\n" if untested else "")


def significance_table(comparisons: list[PairedComparison]) -> str:
    """Difference (arm - control) with its 95% CI and p-values, one row per comparison."""
    holm = any(c.p_holm is not None for c in comparisons)
    lines = [
        "| metric | arm | control | queries | arm | control | diff | 95% CI | p |"
        + (" p (Holm) |" if holm else ""),
        "|---|---|---|---:|---:|---:|---:|---|---:|" + ("---:|" if holm else ""),
    ]
    for c in comparisons:
        mark = " *" if c.significant else ""
        cells = [
            c.metric,
            c.arm,
            c.control,
            str(c.n_queries),
            f"{c.mean_arm:.2f}",
            f"{c.mean_control:.2f}",
            f"{c.diff:+.2f}{mark}",
            f"[{c.ci_low:+.2f}, {c.ci_high:+.2f}]",
            _p(c.p_value),
        ]
        if holm:
            cells.append(_p(c.p_holm))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def significance_csv(comparisons: list[PairedComparison]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    fields = [
        "metric", "arm", "control", "n_queries", "mean_arm", "mean_control",
        "diff", "ci_low", "ci_high", "p_value", "p_holm", "significant",
    ]  # fmt: skip
    writer.writerow(fields)
    for c in comparisons:
        d = c.to_dict()
        writer.writerow(["" if d[f] is None else d[f] for f in fields])
    return buffer.getvalue()
