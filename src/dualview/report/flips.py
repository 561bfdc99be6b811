"""Error analysis of two configurations on a paired benchmark: the queries whose outcome flipped.

A query is one side of a pair (``<pair_id>/a`` or ``/b``: a query with one instruction).
An arm **wins** it in one run when every satisfying passage ranks above every violating one
(pairwise accuracy 100); over several runs (seeds) it wins when it wins in more than half of
them. A query **flipped** between arms A and B when one wins it and the other does not.

Flips are counted per gold domain (from gold pair ids ``gold-<domain>-NNN-orig``) and per
constraint type (the pair's ``constraint``), and listed with the instruction, the satisfying
and the violating passages side by side.

**Lexical suspect**: BM25 (over the benchmark's corpus) of ``query + instruction`` for the
satisfying passage minus the best violating one. A positive margin means word matching alone
gets the query right; if one arm's wins concentrate on such queries, it learned lexical cues.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dualview.data.bm25 import BM25
from dualview.data.schema import Document
from dualview.errors import warn_once
from dualview.io.files import iter_json_lines
from dualview.report.table import ConfigResult

ACCURACY_SUFFIX = "pairwise accuracy"
_GOLD_PAIR = re.compile(r"^(?:gold-([a-z_]+)-\d{3}|phen-([a-z_]+)-[pn]\d{2})")
SNIPPET_WORDS = 60


@dataclass
class QueryText:
    """One side of a pair, with its passages (for display and the lexical margin)."""

    qid: str
    query: str
    instruction: str
    satisfying: list[Document]
    violating: list[Document]
    constraint: str
    domain: str
    lexical_margin: float = 0.0


@dataclass
class Flips:
    """Flipped queries between ``arm_a`` and ``arm_b`` on one paired benchmark."""

    benchmark: str
    arm_a: str
    arm_b: str
    n_queries: int
    a_only: list[str] = field(default_factory=list)
    b_only: list[str] = field(default_factory=list)
    both: int = 0
    neither: int = 0
    texts: dict[str, QueryText] = field(default_factory=dict)


def domain_of(pair_id: str) -> str:
    """The domain in a gold or phenomenon-set pair id, else ``"-"``."""
    match = _GOLD_PAIR.match(pair_id)
    return (match.group(1) or match.group(2)) if match else "-"


def wins(values: Mapping[str, Sequence[float]]) -> dict[str, bool]:
    """Per query: won in more than half of its runs (pairwise accuracy 100)."""
    return {q: sum(v >= 100.0 - 1e-9 for v in vals) * 2 > len(vals) for q, vals in values.items()}


def read_query_texts(files: Sequence[str | Path]) -> dict[str, QueryText]:
    """Query sides of paired benchmarks (each folder's ``pairs.jsonl`` and ``corpus.jsonl``;
    several folders when runs used different sets, e.g. leave-domains-out folds), with the
    lexical margin of each."""
    out: dict[str, QueryText] = {}
    for folder in dict.fromkeys(Path(f).parent for f in files):
        out.update(_folder_query_texts(folder))
    return out


def _folder_query_texts(folder: Path) -> dict[str, QueryText]:
    paths = {name: folder / name for name in ("pairs.jsonl", "corpus.jsonl")}
    if not all(p.is_file() for p in paths.values()):
        warn_once(
            f"warning: {folder}: the benchmark's pairs.jsonl and corpus.jsonl, as its result "
            "file names them, are not there; the error analysis lists its queries without texts"
        )
        return {}
    corpus = {
        str(row["_id"]): Document(
            id=str(row["_id"]), title=row.get("title") or "", text=row.get("text") or ""
        )
        for _, row in iter_json_lines(paths["corpus.jsonl"])
    }
    bm25 = BM25(list(corpus.values()))
    out: dict[str, QueryText] = {}
    for _, row in iter_json_lines(paths["pairs.jsonl"]):
        for key in ("a", "b"):
            side = row[key]
            text = QueryText(
                qid=f"{row['pair_id']}/{key}",
                query=side.get("query", row.get("query", "")),
                instruction=side.get("instruction", ""),
                satisfying=[corpus[d] for d in side.get("satisfying", []) if d in corpus],
                violating=[corpus[d] for d in side.get("violating", []) if d in corpus],
                constraint=str(row.get("constraint") or "-"),
                domain=domain_of(str(row["pair_id"])),
            )
            full = f"{text.query} {text.instruction}"
            good = max((bm25.score(full, d) for d in text.satisfying), default=0.0)
            bad = max((bm25.score(full, d) for d in text.violating), default=0.0)
            text.lexical_margin = good - bad
            out[text.qid] = text
    return out


def find_flips(
    benchmark: str,
    arm_a: str,
    arm_b: str,
    values_a: Mapping[str, Sequence[float]],
    values_b: Mapping[str, Sequence[float]],
    texts: dict[str, QueryText] | None = None,
) -> Flips:
    """Flipped queries from two arms' per-query pairwise accuracies (a list per query over
    runs); only queries both arms have count."""
    won_a, won_b = wins(values_a), wins(values_b)
    common = sorted(set(won_a) & set(won_b))
    flips = Flips(benchmark, arm_a, arm_b, len(common), texts=texts or {})
    for q in common:
        if won_a[q] and not won_b[q]:
            flips.a_only.append(q)
        elif won_b[q] and not won_a[q]:
            flips.b_only.append(q)
        elif won_a[q]:
            flips.both += 1
        else:
            flips.neither += 1
    return flips


def _lexical_share(flips: Flips, qids: Sequence[str]) -> str:
    known = [flips.texts[q].lexical_margin > 0 for q in qids if q in flips.texts]
    return f"{100 * sum(known) / len(known):.0f}%" if known else "-"


def _grouped(flips: Flips, attr: str) -> list[str]:
    a = Counter(getattr(flips.texts[q], attr) for q in flips.a_only if q in flips.texts)
    b = Counter(getattr(flips.texts[q], attr) for q in flips.b_only if q in flips.texts)
    total = Counter(getattr(t, attr) for t in flips.texts.values())
    lines = [
        f"| {attr} | queries | won by {flips.arm_a} only | won by {flips.arm_b} only | net |",
        "|---|---:|---:|---:|---:|",
    ]
    for key in sorted(set(a) | set(b)):
        lines.append(f"| {key} | {total[key]} | {a[key]} | {b[key]} | {a[key] - b[key]:+d} |")
    return lines


def _snippet(doc: Document) -> str:
    words = f"{doc.title}: {doc.text}".split() if doc.title else doc.text.split()
    text = " ".join(words[:SNIPPET_WORDS]) + (" …" if len(words) > SNIPPET_WORDS else "")
    return text.replace("|", "\\|").replace("\n", " ")


def _listing(flips: Flips, qids: Sequence[str], winner: str, limit: int) -> list[str]:
    lines = [
        f"Won by {winner} only ({len(qids)}; first {min(limit, len(qids))}):",
        "",
        "| query | domain / type | instruction | satisfying passage | violating passage(s) "
        "| BM25 margin |",
        "|---|---|---|---|---|---:|",
    ]
    for q in list(qids)[:limit]:
        t = flips.texts.get(q)
        if t is None:
            lines.append(f"| {q} | - | - | - | - | - |")
            continue
        good = "<br>".join(_snippet(d) for d in t.satisfying)
        bad = "<br><br>".join(_snippet(d) for d in t.violating)
        instruction = f"**{t.query}**<br>{t.instruction}".replace("|", "\\|")
        lines.append(
            f"| {q} | {t.domain} / {t.constraint} | {instruction} | {good} | {bad} "
            f"| {t.lexical_margin:+.1f} |"
        )
    return [*lines, ""]


def flips_markdown(flips: Flips, limit: int = 10) -> str:
    """Counts, per-domain and per-type tables, the lexical suspect and the flipped queries."""
    a, b = flips.arm_a, flips.arm_b
    all_q = list(flips.texts)
    lines = [
        f"### Error analysis: {a} vs {b} on {flips.benchmark}",
        "",
        f"{flips.n_queries} queries (one instruction each); won = every satisfying passage "
        "above every violating one (in most seeds). "
        f"Both won {flips.both}, neither {flips.neither}, **{a} only {len(flips.a_only)}, "
        f"{b} only {len(flips.b_only)}**.",
        "",
        "Lexical suspect (share of queries where BM25 of query + instruction already ranks "
        f"the satisfying passage first): all queries {_lexical_share(flips, all_q)}, "
        f"won by {a} only {_lexical_share(flips, flips.a_only)}, "
        f"won by {b} only {_lexical_share(flips, flips.b_only)}.",
        "",
    ]
    if flips.texts and (flips.a_only or flips.b_only):
        lines += [*_grouped(flips, "domain"), "", *_grouped(flips, "constraint"), ""]
    for qids, winner in ((flips.a_only, a), (flips.b_only, b)):
        if qids:
            lines += _listing(flips, qids, winner, limit)
    return "\n".join(lines) + "\n"


def error_analysis(
    rows: Sequence[ConfigResult], pairs: Sequence[tuple[str, str]], limit: int = 10
) -> str:
    """Markdown error analysis of each ``(arm_a, arm_b)`` on every paired benchmark the rows
    have."""
    by_name = {row.name: row for row in rows}
    sections = []
    for arm_a, arm_b in pairs:
        row_a, row_b = by_name[arm_a], by_name[arm_b]
        for label, files in row_a.sources.items():
            column = f"{label} {ACCURACY_SUFFIX}"
            va, vb = row_a.query_values.get(column), row_b.query_values.get(column)
            if not va or not vb:
                continue
            flips = find_flips(label, arm_a, arm_b, va, vb, read_query_texts(files))
            sections.append(flips_markdown(flips, limit))
    return "\n".join(sections)
