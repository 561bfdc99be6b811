"""dualview review: statistics against references, sampling, the verdict file, the web app."""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from pathlib import Path

import pytest
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score
from starlette.testclient import TestClient
from typer.testing import CliRunner

from dualview.cli import app as cli_app
from dualview.errors import DataError
from dualview.review.app import create_app
from dualview.review.items import load_review_set
from dualview.review.sample import allocate, stratified_sample
from dualview.review.stats import cohen_kappa, review_summary, wilson_interval
from dualview.review.store import append_verdict, latest_verdicts, make_verdict, read_verdicts
from tests.review_fixtures import HOSTILE, write_dv_file, write_judge

# -- statistics ---------------------------------------------------------------------------


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (81, 100), (17, 40)])
def test_wilson_matches_scipy(k: int, n: int) -> None:
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(ref.low, abs=1e-9)
    assert hi == pytest.approx(ref.high, abs=1e-9)


def test_wilson_known_value() -> None:
    # Hand computation: k=8, n=10, z=1.96 -> [0.4902, 0.9433] (Newcombe 1998, table I style)
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    with pytest.raises(ValueError):
        wilson_interval(3, 0)


@pytest.mark.parametrize(
    "a,b",
    [
        ("vvvvvxxxxx", "vvvvxxxxxv"),
        ("vvvvvvvvvx", "vvvvvvvvxx"),
        ("vxvxvxvxvx", "xvxvxvxvxv"),
        ("vvvxxx", "vvvxxx"),
        ("abcabcabca", "abcbbcaacc"),
    ],
)
def test_kappa_matches_sklearn(a: str, b: str) -> None:
    assert cohen_kappa(list(a), list(b)) == pytest.approx(cohen_kappa_score(list(a), list(b)))


def test_kappa_known_value_and_degenerate() -> None:
    # 2x2 table [[20, 5], [10, 15]]: p_o = 0.7, p_e = 0.5 -> kappa 0.4
    human = ["v"] * 25 + ["x"] * 25
    judge = ["v"] * 20 + ["x"] * 5 + ["v"] * 10 + ["x"] * 15
    assert cohen_kappa(human, judge) == pytest.approx(0.4)
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["v", "v"], ["v", "v"]) == 1.0


# -- sampling -----------------------------------------------------------------------------


def test_allocation_is_proportional_and_exact() -> None:
    counts = allocate({"a": 600, "b": 300, "c": 100}, 10)
    assert counts == {"a": 6, "b": 3, "c": 1}
    counts = allocate({"a": 1, "b": 1, "c": 1}, 2)
    assert sum(counts.values()) == 2 and max(counts.values()) == 1
    assert allocate({"a": 3}, 10) == {"a": 3}


def test_stratified_sample_is_seeded_and_stratified() -> None:
    strata = ["big"] * 2000 + ["mid"] * 700 + ["tiny"] * 300
    first = stratified_sample(strata, 100, seed=7)
    assert first == stratified_sample(strata, 100, seed=7)
    assert first != stratified_sample(strata, 100, seed=8)
    assert len(set(first)) == 100
    assert Counter(strata[i] for i in first) == {"big": 67, "mid": 23, "tiny": 10}
    # Within a stratum every item can be drawn (not just the first ones).
    assert max(i for i in first if strata[i] == "big") > 1000


# -- verdict file -------------------------------------------------------------------------


def _item(i: int) -> dict:
    return {"item": f"it{i}", "stratum": "s", "judge": None, "expected": None}


def _writer(path: str, reviewer: str, count: int) -> None:
    for i in range(count):
        append_verdict(path, make_verdict(_item(i), reviewer, "valid", None, ""))


def test_two_processes_append_without_losing_lines(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), r, 40)) for r in ("ann", "bob")]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    rows = read_verdicts(path)
    assert Counter(r["reviewer"] for r in rows) == {"ann": 40, "bob": 40}
    assert len({r["verdict_id"] for r in rows}) == 80


def test_torn_line_is_dropped_and_latest_verdict_wins(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    append_verdict(path, make_verdict(_item(1), "ann", "valid", None, ""))
    append_verdict(path, make_verdict(_item(1), "ann", "invalid", "near_copy", "oops"))
    with path.open("a") as handle:
        handle.write('{"item": "it2", "revie')  # a writer killed mid-line
    latest = latest_verdicts(path)
    assert [(v["item"], v["verdict"], v["failure_mode"]) for v in latest] == [
        ("it1", "invalid", "near_copy")
    ]
    append_verdict(path, make_verdict(_item(2), "ann", "valid", None, ""))
    assert [v["item"] for v in latest_verdicts(path)] == ["it1", "it2"]


def test_bad_verdict_fields_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        make_verdict(_item(1), "bad id/..", "valid", None, "")
    with pytest.raises(ValueError):
        make_verdict(_item(1), "ann", "maybe", None, "")
    with pytest.raises(ValueError):
        make_verdict(_item(1), "ann", "invalid", "no-such-mode", "")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item": "a", "reviewer": "r", "verdict": "valid"}\n{"item": "b"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: reviewer"):
        read_verdicts(bad)


# -- items and the summary ----------------------------------------------------------------


def test_review_set_from_file_with_judge(tmp_path: Path) -> None:
    data = write_dv_file(tmp_path / "dv.jsonl", {"law": 30, "food": 10})
    judge = write_judge(data, ["r0-dv", "r1-dv"], ["r2-dv"])
    review = load_review_set(str(data), n=8, seed=1, judge=judge)
    assert review.verdicts == tmp_path / "dv.jsonl.review.jsonl"
    assert Counter(i.stratum for i in review.items) == {"law": 6, "food": 2}
    item = next(i for i in load_review_set(str(data), n=40, judge=judge).items if i.id == "r2-dv")
    assert (item.judge, item.judge_reason) == ("invalid", "dv: picked")
    assert item.p_plus is not None and item.p_plus.id == "p2"
    assert item.n_star.id == "n2" and [d.id for d in item.others] == ["o2"]
    assert item.orig_instruction == "original instruction 2"


def test_gold_mode_mixes_gold_and_controls() -> None:
    review = load_review_set("gold:train", n=40, seed=0)
    kinds = Counter(i.expected for i in review.items)
    assert kinds == {"valid": 20, "invalid": 20}
    control = next(i for i in review.items if i.expected == "invalid")
    assert control.instruction == control.orig_instruction
    # nothing shown on the page tells a control from a gold reversal
    assert all(i.id.startswith("g-") and ":" not in i.stratum for i in review.items)
    assert control.snapshot()["record_id"].endswith("-control")


def test_summary_numbers(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    # human: 6 valid, 4 invalid; judge agrees on 8 of 10 -> table [[5, 1], [1, 3]]
    human = ["valid"] * 6 + ["invalid"] * 4
    judge = ["valid"] * 5 + ["invalid"] + ["valid"] + ["invalid"] * 3
    for i, (h, j) in enumerate(zip(human, judge, strict=True)):
        item = {"item": f"i{i}", "stratum": "a" if i % 2 else "b", "judge": j, "expected": None}
        append_verdict(
            path, make_verdict(item, "ann", h, "off_topic" if h == "invalid" else None, "")
        )
    s = review_summary(path)
    assert s["accuracy"]["k"] == 6 and s["accuracy"]["n"] == 10
    assert s["accuracy"]["ci95"] == pytest.approx(list(wilson_interval(6, 10)))
    assert s["failure_modes"] == {"off_topic": 4}
    assert s["judge"]["confusion"] == {
        "valid": {"valid": 5, "invalid": 1},
        "invalid": {"valid": 1, "invalid": 3},
    }
    assert s["judge"]["kappa"] == pytest.approx(cohen_kappa_score(human, judge))
    assert s["gold"] is None and s["inter_reviewer"] is None
    result = CliRunner().invoke(cli_app, ["review", "stats", str(path)])
    assert result.exit_code == 0, result.output
    assert "Cohen's kappa 0.583" in result.output and "60.0% [31.3, 83.2] (6/10)" in result.output


def test_stats_of_missing_file_is_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli_app, ["review", "stats", str(tmp_path / "none.jsonl")])
    assert result.exit_code != 0


# -- the web app --------------------------------------------------------------------------


@pytest.fixture()
def client(tmp_path: Path) -> tuple[TestClient, object]:
    data = write_dv_file(tmp_path / "dv.jsonl", {"law": 4, "food": 2})
    review = load_review_set(str(data), n=6, seed=0)
    return TestClient(create_app(review, "ann"), base_url="http://127.0.0.1"), review


def test_page_escapes_untrusted_text(client) -> None:
    c, review = client
    index = next(i for i, it in enumerate(review.items) if it.id == "r0-dv")
    page = c.get(f"/item/{index}").text
    assert HOSTILE not in page and "<script>window" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "&lt;/textarea&gt;&lt;b&gt;bold&lt;/b&gt;" in page
    assert "script-src 'self'" in c.get(f"/item/{index}").headers["content-security-policy"]


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2fstore.py",
        "/static/review.js/../../items.py",
        "/../../etc/passwd",
        "/item/..%2f..%2fetc%2fpasswd",
        "/item/-1",
        "/item/6",
    ],
)
def test_path_traversal_is_refused(client, path: str) -> None:
    c, _ = client
    response = c.get(path)
    assert response.status_code == 404
    assert "import" not in response.text and "root:" not in response.text


def test_save_flow_and_bad_requests(client) -> None:
    c, review = client
    first = c.get("/", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/item/0?reviewer=ann"
    body = {"index": 0, "item": review.items[0].id, "reviewer": "ann", "verdict": "invalid"}
    saved = c.post("/api/verdict", json={**body, "failure_mode": "unnatural", "note": "<b>"})
    assert saved.status_code == 200 and saved.json()["next"] == "/item/1?reviewer=ann"
    assert c.get("/", follow_redirects=False).headers["location"] == "/item/1?reviewer=ann"
    # another reviewer starts from the beginning; the first one's verdict is untouched
    assert c.get("/?reviewer=bob", follow_redirects=False).headers["location"].startswith("/item/0")
    assert c.post("/api/verdict", json={**body, "item": "other"}).status_code == 400
    assert c.post("/api/verdict", json={**body, "index": 99}).status_code == 400
    assert c.post("/api/verdict", json={**body, "reviewer": "a b"}).status_code == 400
    assert c.post("/api/verdict", content=json.dumps(body)).status_code == 415
    rows = read_verdicts(review.verdicts)
    assert [(r["reviewer"], r["failure_mode"], r["note"]) for r in rows] == [
        ("ann", "unnatural", "<b>")
    ]
    assert "&lt;b&gt;" in c.get("/item/0").text


def test_foreign_host_header_is_refused(client) -> None:
    c, _ = client
    assert c.get("/item/0", headers={"host": "evil.example"}).status_code == 400


def test_report_gets_the_review_section(tmp_path: Path) -> None:
    from dualview.report import ReportOptions, write_report
    from dualview.report.collect import collect_rows
    from dualview.review.stats import report_sections
    from tests.test_report_flips import ARM_A, _bench, _eval_json

    run = tmp_path / "run"
    run.mkdir()
    assert report_sections(None, [run]) == []
    for i, verdict in enumerate(["valid", "valid", "invalid"]):
        item = {"item": f"i{i}", "stratum": "s", "judge": "valid", "expected": None}
        mode = "near_copy" if verdict == "invalid" else None
        append_verdict(run / "review.jsonl", make_verdict(item, "ann", verdict, mode, ""))
    sections = report_sections(None, [run])
    assert [h for h, _ in sections] == ["Human review (review.jsonl)"]
    _eval_json(tmp_path / "eval" / "a", _bench(tmp_path / "bench"), ARM_A)
    rows = collect_rows(tmp_path / "eval", {"A": "a"})
    options = ReportOptions(comparisons=[], error_pairs=[], sections=sections)
    md = write_report(rows, tmp_path / "report", "t", options).markdown.read_text()
    assert "### Human review (review.jsonl)" in md
    assert "| inversion accuracy (human) | 66.7% [20.8, 93.9] (2/3) |" in md
    assert "| near-copy of the original | 1 |" in md
