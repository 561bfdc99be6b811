"""The hand-written phenomenon set (query-side polarity, negation): checker and benchmark."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from dualview.data.phenomena import (
    PHENOMENA_DIR,
    SOURCE_DIR,
    build,
    load_pairs,
    sentence_count,
)
from dualview.errors import DataError
from dualview.eval.benchmarks import data_path, load_benchmark
from dualview.eval.benchmarks.base import EvalContext
from dualview.io.files import iter_json_lines
from dualview.report.collect import column_sources
from dualview.report.flips import domain_of
from tests.test_eval_benchmarks import BagOfWords


def _rows(name: str) -> list[dict]:
    return [row for _, row in iter_json_lines(PHENOMENA_DIR / name)]


def test_built_files_match_the_sources(tmp_path: Path) -> None:
    shutil.copy(PHENOMENA_DIR / "CARD.md", tmp_path / "CARD.md")
    build(SOURCE_DIR, tmp_path)
    for name in ("corpus.jsonl", "pairs.jsonl", "counts.json", "CARD.md"):
        assert (tmp_path / name).read_bytes() == (PHENOMENA_DIR / name).read_bytes(), name


def test_ids_unique_pairs_complete_and_counts() -> None:
    corpus = {row["_id"] for row in _rows("corpus.jsonl")}
    pairs = _rows("pairs.jsonl")
    ids = [p["pair_id"] for p in pairs]
    assert len(ids) == len(set(ids)) >= 100
    queries = [p[k]["query"].lower() for p in pairs for k in "ab"]
    assert len(queries) == len(set(queries))
    for p in pairs:
        a, b = p["a"], p["b"]
        assert a["instruction"] == b["instruction"] == ""
        assert a["query"] != b["query"]
        assert len(a["satisfying"]) == len(a["violating"]) == 1
        assert a["satisfying"] == b["violating"] and b["satisfying"] == a["violating"]
        assert a["satisfying"] != b["satisfying"]
        assert set(p["candidates"][:2]) == {a["satisfying"][0], b["satisfying"][0]}
        assert len(set(p["candidates"])) == len(p["candidates"])
        assert set(p["candidates"]) <= corpus
    kinds = Counter(p["constraint"] for p in pairs)
    assert kinds["polarity"] >= 50 and kinds["negation"] >= 40
    domains = Counter(p["domain"] for p in pairs)
    assert len(domains) >= 8 and min(domains.values()) >= 8
    counts = json.loads((PHENOMENA_DIR / "counts.json").read_text())
    assert counts["pairs"] == len(pairs)
    assert counts["phenomena"] == dict(kinds)


def test_extras_are_same_domain_passages_of_other_pairs() -> None:
    pairs = _rows("pairs.jsonl")
    owner = {p[k]["satisfying"][0]: p for p in pairs for k in "ab"}
    for p in pairs:
        for doc in p["candidates"][2:]:
            other = owner[doc]
            assert other["domain"] == p["domain"] and other["pair_id"] != p["pair_id"]


def _write(folder: Path, line: dict, name: str = "health.jsonl") -> Path:
    folder.mkdir(exist_ok=True)
    good = next(iter_json_lines(SOURCE_DIR / "health.jsonl"))[1]
    (folder / name).write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    return folder


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"id": "food-p09"}, "id", "not health-pNN"),
        ({"id": "health-n09"}, "phenomenon", "does not match"),
        ({"phenomenon": "irony", "id": "health-p09"}, "phenomenon", ""),
        ({"id": "health-p01"}, "id", "repeats"),
        ({"a": {"query": "q", "title": "t", "text": "One sentence only."}}, "a.text", "sentences"),
        ({"extra": 1}, "extra", ""),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, change: dict, field: str, message: str
) -> None:
    base = next(iter_json_lines(SOURCE_DIR / "health.jsonl"))[1]
    line = {**base, "id": "health-p09", **change}
    if "a" not in change:  # a new pair needs its own queries and passages
        line["a"] = {**base["a"], "query": "new a", "text": base["a"]["text"] + " More."}
        line["b"] = {**base["b"], "query": "new b", "text": base["b"]["text"] + " More."}
    folder = _write(tmp_path / "src", line)
    with pytest.raises(DataError) as err:
        load_pairs(folder)
    text = str(err.value)
    assert f"health.jsonl:2: {field}" in text and message in text


def test_repeated_passage_across_pairs_is_rejected(tmp_path: Path) -> None:
    base = next(iter_json_lines(SOURCE_DIR / "health.jsonl"))[1]
    line = {**base, "id": "health-p09"}
    line["a"] = {**base["a"], "query": "new a"}
    line["b"] = {**base["b"], "query": "new b", "text": base["b"]["text"] + " More."}
    with pytest.raises(DataError, match=r"health.jsonl:2: a.text: repeats .*health.jsonl:1"):
        load_pairs(_write(tmp_path / "src", line))


def test_sentence_count() -> None:
    assert sentence_count("One. Two 2.5 percent! Three?") == 3
    assert sentence_count("Dr. no capital after. Ends here.") == 2


class WideBagOfWords(BagOfWords):
    """Word counts over a vocabulary large enough for the whole set."""

    dim = 8192


@pytest.fixture
def ctx() -> EvalContext:
    return EvalContext(encoder=WideBagOfWords(), backend="torch")  # type: ignore[arg-type]


def test_benchmark_reads_the_bundled_set_per_phenomenon(ctx: EvalContext) -> None:
    whole = load_benchmark("phenomena")
    assert len(whole.pairs) == len(_rows("pairs.jsonl"))
    result = whole.evaluate(ctx)
    for name in ("p-MRR", "nDCG@10", "polarity/p-MRR", "negation/nDCG@10"):
        assert name in result.metrics
    ids = {q.split("/")[0] for q in result.per_query["negation/nDCG@10"]}
    assert ids and all("-n" in i for i in ids)
    as_paired = load_benchmark(f"paired={PHENOMENA_DIR}")  # the plain paired layout
    assert [p.pair_id for p in as_paired.pairs] == [p.pair_id for p in whole.pairs]
    negation = load_benchmark("phenomena:negation")
    assert {p.constraint for p in negation.pairs} == {"negation"}
    with pytest.raises(DataError, match="no pair has"):
        load_benchmark("phenomena:irony")


def test_no_lexical_shortcut(ctx: EvalContext) -> None:
    # Word overlap alone must not solve the set: a bag-of-words ranker sits near chance on
    # putting the satisfying passage above the violating one.
    result = load_benchmark("phenomena").evaluate(ctx)
    assert 35.0 <= result.metrics["pairwise accuracy"] <= 65.0


def test_report_reads_domains_columns_and_pipeline_inputs() -> None:
    assert domain_of("phen-home-n03") == "home"
    assert domain_of("gold-law-004-orig") == "law"
    assert domain_of("p1") == "-"
    columns = column_sources("phenomena", "phenomena", {"negation/nDCG@10": 0.5, "x": 1.0})
    assert columns == {"phenomena negation/nDCG@10": "negation/nDCG@10"}
    headline = {"p-MRR": 1.0, "pairwise accuracy": 50.0, "nDCG@10": 0.5}
    # pairwise accuracy per query is what the flipped-query error analysis reads
    assert set(column_sources("phenomena", "phenomena", headline)) == {
        "phenomena p-MRR",
        "phenomena pairwise accuracy",
        "phenomena nDCG@10",
    }
    assert data_path("phenomena") == PHENOMENA_DIR
    assert data_path("phenomena=/tmp/x") == Path("/tmp/x")
    assert data_path("followir") is None
