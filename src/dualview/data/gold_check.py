"""Quality check of the gold set itself: shortcuts and broken reversals a writer can miss.

Three kinds of finding, each naming the instance, its file and line:

- ``near_duplicate``: P+ and an instruction negative (N* above all) are near-duplicates:
  word 3-shingle Jaccard >= ``max_shingle_jaccard`` or character ratio (difflib) >=
  ``max_char_ratio``. A pair that differs by one word teaches nothing about the instruction.
- ``leak``: a rare content word of the instruction (document frequency over all gold passages
  <= ``max_leak_df``) occurs in P+ and in none of the instruction negatives, so matching the
  word alone finds the positive. The same is checked for the reversed instruction against N*
  (P+ and the other negatives are its negatives). Words are compared after light stemming.
  For ``keyword_inclusion`` the keyword *is* the constraint, so a leak is allowed when the
  reversed side is consistent: the reversed instruction names the leaked word too (it asks
  for passages *without* it, so the lexical cue points the wrong way in the dual view), or
  it has a mirror keyword of its own that occurs in N* and not in the other passages.
  Conversely, a ``keyword_inclusion`` instance is flagged when *no* instruction word
  isolates P+ (the keyword is missing from P+ or also occurs in an instruction negative).
- ``equal_reversal``: the reversed instruction equals the original after normalization, or
  their character ratio is >= ``max_reversal_ratio``.
- ``same_query``: two instances ask (nearly) the same query: Jaccard of their content-word
  stems >= ``max_query_jaccard``. Extra hard negatives are drawn from other instances of the
  domain, so a second instance on the same query would turn its positives into false negatives.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from dualview.config import StrictModel
from dualview.data.gold import GoldInstance, LocatedInstance, normalize_text

_WORD = re.compile(r"[a-z][a-z'-]*")
_SUFFIXES = ("ingly", "ing", "edly", "ies", "ied", "ed", "es", "ly", "s")
_STOPWORD_TEXT = """a about above after again against all also am an and any are as at be
    because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not now of off on once only or other our ours out over
    own same she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours want wanted looking look need needs please find show give
    relevant irrelevant only information material materials page pages passage passages text
    texts something anything written write writing focus focused focuses about instead rather
    like must may one ones use used using say says said sure whether either neither
    least enough likely less many much well
    """
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


class CheckConfig(StrictModel):
    """Thresholds of the gold-set check."""

    max_shingle_jaccard: float = 0.5
    max_char_ratio: float = 0.8
    max_leak_df: float = 0.05
    max_reversal_ratio: float = 0.95
    max_query_jaccard: float = 0.8
    shingle_size: int = 3


@dataclass(frozen=True)
class Finding:
    """One flagged problem."""

    instance: str
    path: Path
    line: int
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.instance}: {self.kind}: {self.detail}"


def stem(word: str) -> str:
    """A light suffix-stripping stem: 'adults'/'adult', 'change'/'changes'/'changing' agree."""
    word = word.strip("'-").removesuffix("'s")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) >= 6 else word


def tokens(text: str) -> list[str]:
    """Lower-cased alphabetic words."""
    return _WORD.findall(text.lower())


def content_stems(text: str) -> set[str]:
    """Stems of the non-stopword words of at least 3 letters."""
    return {stem(w) for w in tokens(text) if len(w) >= 3 and w not in STOPWORDS}


def shingle_jaccard(a: str, b: str, size: int = 3) -> float:
    """Jaccard similarity of the word ``size``-shingles of two texts."""

    def shingles(text: str) -> set[tuple[str, ...]]:
        words = tokens(text)
        return {tuple(words[i : i + size]) for i in range(max(1, len(words) - size + 1))}

    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def char_ratio(a: str, b: str) -> float:
    """difflib's similarity ratio of the normalized texts (1.0 = identical)."""
    return SequenceMatcher(None, normalize_text(a), normalize_text(b), autojunk=False).ratio()


def document_frequency(instances: list[GoldInstance]) -> tuple[Counter[str], int]:
    """How many gold passages contain each content stem, and the number of passages."""
    df: Counter[str] = Counter()
    n = 0
    for inst in instances:
        for passage in inst.passages():
            df.update(content_stems(f"{passage.title} {passage.text}"))
            n += 1
    return df, n


def _text(passage) -> str:
    return f"{passage.title} {passage.text}"


def leaked_words(instruction: str, positive: str, negatives: list[str], rare: set[str]) -> set[str]:
    """Rare instruction stems that occur in ``positive`` and in none of ``negatives``."""
    in_negatives = set().union(*(content_stems(n) for n in negatives)) if negatives else set()
    return (content_stems(instruction) & rare & content_stems(positive)) - in_negatives


def _near_duplicates(inst: GoldInstance, cfg: CheckConfig) -> list[str]:
    out = []
    for index, neg in enumerate(inst.instruction_negatives):
        jac = shingle_jaccard(inst.positive.text, neg.text, cfg.shingle_size)
        ratio = char_ratio(inst.positive.text, neg.text)
        if jac >= cfg.max_shingle_jaccard or ratio >= cfg.max_char_ratio:
            name = "N*" if neg.n_star else f"instruction_negatives[{index}]"
            out.append(f"P+ vs {name}: shingle Jaccard {jac:.2f}, char ratio {ratio:.2f}")
    return out


def _leaks(inst: GoldInstance, rare: set[str]) -> list[str]:
    pos, nstar = _text(inst.positive), _text(inst.n_star)
    others = [_text(p) for p in inst.other_negatives]
    orig = leaked_words(inst.instruction, pos, [nstar, *others], rare)
    rev = leaked_words(inst.reversed_instruction, nstar, [pos, *others], rare)
    if inst.constraint_type == "keyword_inclusion":
        if not orig:
            return ["no instruction keyword occurs in P+ and in none of the instruction negatives"]
        rev_stems = content_stems(inst.reversed_instruction)
        consistent = bool(rev) or orig <= rev_stems
        if consistent:
            return []
        return [f"keyword {sorted(orig)} in P+ only, and the reversed side has no mirror cue"]
    out = []
    if orig:
        out.append(f"instruction words only in P+: {sorted(orig)}")
    if rev:
        out.append(f"reversed-instruction words only in N*: {sorted(rev)}")
    return out


def _equal_reversal(inst: GoldInstance, cfg: CheckConfig) -> list[str]:
    ratio = char_ratio(inst.instruction, inst.reversed_instruction)
    if ratio >= cfg.max_reversal_ratio:
        return [f"reversed instruction nearly equals the original (char ratio {ratio:.2f})"]
    return []


def _same_queries(located: list[LocatedInstance], cfg: CheckConfig) -> list[Finding]:
    """Later instances whose query nearly repeats an earlier one's."""
    findings = []
    seen: list[tuple[str, set[str]]] = []
    for li in located:
        stems = content_stems(li.instance.query)
        for other_id, other in seen:
            union = stems | other
            overlap = len(stems & other) / len(union) if union else 1.0
            if overlap >= cfg.max_query_jaccard:
                detail = f"query nearly repeats {other_id}'s (content-word Jaccard {overlap:.2f})"
                findings.append(
                    Finding(li.instance.instance, li.path, li.line, "same_query", detail)
                )
        seen.append((li.instance.instance, stems))
    return findings


def check_instances(
    located: list[LocatedInstance], config: CheckConfig | None = None
) -> list[Finding]:
    """All findings over ``located`` (rarity is computed over all of them together)."""
    cfg = config or CheckConfig()
    df, n_passages = document_frequency([li.instance for li in located])
    # A word in a single passage is always rare, however small the set.
    limit = max(1.0, cfg.max_leak_df * n_passages)
    rare = {w for w, count in df.items() if count <= limit}
    findings = []
    for li in located:
        inst = li.instance
        checks = {
            "near_duplicate": _near_duplicates(inst, cfg),
            "leak": _leaks(inst, rare),
            "equal_reversal": _equal_reversal(inst, cfg),
        }
        for kind, details in checks.items():
            findings.extend(Finding(inst.instance, li.path, li.line, kind, d) for d in details)
    return findings + _same_queries(located, cfg)
