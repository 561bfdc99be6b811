"""Hostile use of the commands (issue 35): outputs that are inputs, result folders that
collide, jobs whose every unit failed, unknown report options, and servers that answer with
numbers out of range or ask to wait for years."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from dualview.errors import DataError
from dualview.io.atomic import write_jsonl
from dualview.io.paths import check_outputs
from dualview.synth.backends.base import BackendConfig, SamplingParams, TransientBackendError
from dualview.synth.backends.openai_http import OpenAIBackend, parse_retry_after
from dualview.synth.testing import StubReply, StubServer, default_reply
from tests.conftest import FIXTURES
from tests.helpers import invoke_in_process, make_record
from tests.review_fixtures import write_dv_file

ORIG = FIXTURES / "synth" / "orig.jsonl"
BEIR = FIXTURES / "formats" / "beir-mini"
PAIRED = FIXTURES / "eval" / "paired"
LLM = ["--llm-backend", "openai", "--model", "stub", "--base-url"]


def invoke(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """``dualview ARGV`` in-process: (exit code, stderr); a traceback fails the test."""
    code, _, err = invoke_in_process(argv, capsys)
    if code == -1:
        pytest.fail(f"traceback:\n{err}", pytrace=False)
    return code, err


def refused(code: int, err: str, output: Path) -> None:
    """Exit 2 with one located line naming the output."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"error: {output}: output: "), err


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- item 3: no command writes over one of its inputs -----------------------------------------
def _records(root: Path) -> Path:
    path = root / "g.jsonl"
    shutil.copyfile(ORIG, path)
    return path


def _link(root: Path, target: Path, name: str = "link.jsonl") -> Path:
    link = root / name
    link.symlink_to(target)
    return link


def _beir(root: Path) -> Path:
    folder = root / "beir"
    shutil.copytree(BEIR, folder)
    return folder


def _verdicts(root: Path) -> Path:
    from dualview.review.store import append_verdict, make_verdict

    path = root / "v.jsonl"
    item = {"item": "i0", "stratum": "s", "judge": "valid", "expected": None}
    append_verdict(path, make_verdict(item, "ann", "valid", None, ""))
    return path


# Each case: (id, builder of (argv, the output the error must name)); {URL} is the stub's.
def _cases():
    def synth_cache_is_input(root):
        src = _records(root)
        return [
            "reverse",
            str(src),
            "-o",
            str(root / "o.jsonl"),
            *LLM,
            "{URL}",
            "--llm-cache",
            str(src),
        ], src

    def synth_cache_is_link(root):
        src = _records(root)
        link = _link(root, src)
        return [
            "reverse",
            str(src),
            "-o",
            str(root / "o.jsonl"),
            *LLM,
            "{URL}",
            "--llm-cache",
            str(link),
        ], link

    def synth_cache_is_output(root):
        src, out = _records(root), root / "o.jsonl"
        return ["seed", str(src), "-o", str(out), *LLM, "{URL}", "--llm-cache", str(out)], out

    def synth_config_is_output(root):
        src, config = _records(root), root / "job.yaml"
        config.write_text("runner: {concurrency: 2}\n")
        return [
            "reverse",
            str(src),
            "-o",
            str(config),
            *LLM,
            "{URL}",
            "--config",
            str(config),
        ], config

    def synth_merge_into_a_shard(root):
        from dualview.synth.jobs import load_job, run_job

        src, shard = _records(root), root / "s.jsonl"
        with StubServer() as server:
            sets = [
                "backend.kind=openai",
                "backend.model=stub",
                f"backend.base_url={server.base_url}",
            ]
            run_job("reverse", load_job("reverse", None, sets), src, shard)
        return ["synth-merge", str(shard), "-o", str(shard)], shard

    def mine_out_is_input(root):
        from tests.train_tiny import make_tiny_encoder

        src, config = _records(root), root / "mine.yaml"
        model = make_tiny_encoder(root / "tiny")
        config.write_text(json.dumps({"model": str(model), "num_negatives": 2, "rank_end": 5}))
        return ["mine", str(src), "-o", str(src), "--config", str(config)], src

    def gold_build_into_its_source(root):
        from dualview.data import gold

        folder = root / "source"
        folder.mkdir()
        shutil.copyfile(gold.SOURCE_DIR / "food.jsonl", folder / "food.jsonl")
        shutil.copyfile(gold.GOLD_DIR / "CARD.md", folder / "CARD.md")
        return ["data", "gold-build", "--source", str(folder), "--out", str(folder)], folder

    def mix_out_is_input(root):
        src = _records(root)
        return ["mix", str(src), "-o", str(src), "--preset", "ins-orig", "--size", "4"], src

    def mix_out_is_link(root):
        src = _records(root)
        link = _link(root, src)
        return ["mix", str(src), "-o", str(link), "--preset", "ins-orig", "--size", "4"], link

    def convert_out_is_input(root):
        src = _records(root)
        return ["data", "convert", str(src), "-o", str(src)], src

    def convert_out_in_beir_folder(root):
        folder = _beir(root)
        out = folder / "corpus.jsonl"
        return ["data", "convert", str(folder), "-o", str(out), "--from", "beir"], out

    def validate_rejects_is_input(root):
        src = _records(root)
        return ["data", "validate", str(src), "--skip-invalid", "--rejects-path", str(src)], src

    def split_beir_into_source(root):
        folder = _beir(root)
        return [
            "data",
            "split-beir",
            str(folder),
            str(folder),
            str(root / "b"),
            "--size",
            "1",
        ], folder

    def export_out_is_input(root):
        src = _records(root)
        return ["export", str(src), "-o", str(src)], src

    def export_folder_holds_input(root):
        src = _records(root)
        return ["export", str(src), "-o", str(root), "--to", "hf"], root

    def review_stats_json_is_input(root):
        verdicts = _verdicts(root)
        return ["review", "stats", str(verdicts), "--out", str(verdicts)], verdicts

    def review_export_out_is_input(root):
        data = write_dv_file(root / "dv.jsonl", {"law": 2})
        return ["review", "export", str(data), "--out", str(data), "--size", "2"], data

    def eval_out_is_benchmark(root):
        folder = root / "paired"
        shutil.copytree(PAIRED, folder)
        out = folder / "results"
        argv = ["eval", "--first-stage", "bm25", "-b", f"paired={folder}", "-o", str(out)]
        return argv, out

    return {name: fn for name, fn in locals().items() if callable(fn) and not name.startswith("_")}


CASES = _cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_output_that_is_an_input_is_refused_before_writing(case, tmp_path, capsys) -> None:
    root = tmp_path / "w"
    root.mkdir()
    argv, output = CASES[case](root)
    before = snapshot(root)
    with StubServer() as server:
        argv = [a.replace("{URL}", server.base_url) for a in argv]
        code, err = invoke(argv, capsys)
        requests = server.requests
    refused(code, err, output)
    assert snapshot(root) == before  # nothing written, nothing changed
    assert requests == 0


def test_check_outputs_sees_through_symlinks_hard_links_and_folders(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    hard = tmp_path / "hard.jsonl"
    os.link(data, hard)
    (tmp_path / "d").mkdir()
    folder_link = tmp_path / "dl"
    folder_link.symlink_to(tmp_path / "d")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    check_outputs([tmp_path / "new.jsonl", None], [data, None, loop])  # nothing clashes
    check_outputs([tmp_path / "e"], [tmp_path / "e" / "m"], replaced=False)  # results beside
    for output, inputs in [
        (hard, [data]),
        (folder_link / "x.jsonl", [tmp_path / "d"]),  # inside an input folder, via a link
        (tmp_path, [data]),  # a replaced folder that holds the input
        (loop, [loop]),
    ]:
        with pytest.raises(DataError, match="output"):
            check_outputs([output], inputs)
    with pytest.raises(DataError, match="is also the output"):
        check_outputs([data, folder_link / ".." / "data.jsonl"], [])


# -- item 4: result folders are unique per model ----------------------------------------------
def test_two_models_that_clean_to_one_result_folder_are_refused(
    tmp_path, capsys, monkeypatch
) -> None:
    from tests.train_tiny import make_tiny_encoder

    tiny = make_tiny_encoder(tmp_path / "tiny")
    (tmp_path / "bi-run").mkdir()
    (tmp_path / "bi-run" / "model").symlink_to(tiny)
    (tmp_path / "bi-run_model").symlink_to(tiny)
    out = tmp_path / "e"
    monkeypatch.chdir(tmp_path)
    argv = ["eval", "bi-run/model", "bi-run_model", "-b", f"paired={PAIRED}", "-o", str(out)]
    code, err = invoke([*argv, "--no-embedding-cache"], capsys)
    assert code == 2 and err.startswith(f"error: {out / 'bi-run_model'}: "), err
    assert "'bi-run/model' and model 'bi-run_model' would share" in err
    assert not out.exists()


def test_two_reranker_folders_that_clean_to_one_name_are_refused(tmp_path) -> None:
    from dualview.errors import DualviewError
    from dualview.eval.layout import check_result_folders
    from dualview.eval.two_stage import RerankSettings

    settings = RerankSettings(rerankers=["a/ce", "a_ce"], first_stage="bm25")
    with pytest.raises(DualviewError, match="'a/ce@bm25' and model 'a_ce@bm25' would share"):
        check_result_folders(settings.columns([]), tmp_path)
    with pytest.raises(DualviewError, match="mteb results and model 'mteb'"):
        check_result_folders(["mteb"], tmp_path)
    check_result_folders(["a/ce", "b/ce", "a/ce@bm25"], tmp_path)  # distinct folders


# -- item 9: a job whose units all failed is an error ------------------------------------------
def _failing(request: dict) -> StubReply:
    return StubReply(status=503, body="overloaded")


def _half_failing(request: dict) -> StubReply:
    prompt = request["messages"][-1]["content"]
    return (
        _failing(request) if "query 0" in prompt or "query 1" in prompt else default_reply(request)
    )


FAST = ["--set", "backend.max_retries=0", "--set", "backend.retry_base_s=0.01"]


def test_a_synth_run_whose_every_unit_failed_exits_non_zero(tmp_path, capsys) -> None:
    src, out = _records(tmp_path), tmp_path / "o.jsonl"
    with StubServer(_failing) as server:
        code, err = invoke(
            ["reverse", str(src), "-o", str(out), *LLM, server.base_url, *FAST], capsys
        )
    stats = json.loads(Path(f"{out}.stats.json").read_text())  # written all the same
    errors, units = stats["outcomes"]["error"], stats["units"]
    assert code == 1 and errors > 0 and stats["outcomes"]["ok"] == 0, err
    assert f"error: {out}: {errors} of {units} unit(s) failed with backend errors" in err
    assert "no unit was answered" in err and "HTTP 503" in err
    assert f"reasons in {out}.dropped.jsonl, counts in {out}.stats.json" in err


def test_the_error_share_a_job_tolerates_is_configurable(tmp_path, capsys) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    write_jsonl(src, [make_record(f"r{i}", "plain", query=f"query {i}") for i in range(4)])
    argv = ["seed", str(src), "-o", str(out), *LLM, "{URL}", *FAST]
    with StubServer(_half_failing) as server:
        argv = [a.replace("{URL}", server.base_url) for a in argv]
        default, _ = invoke(argv, capsys)  # some answered: within the default share
        strict, err = invoke([*argv, "--set", "runner.max_error_share=0.25"], capsys)
    assert default == 0
    assert strict == 1 and "2 of 4 unit(s)" in err and "max_error_share 0.25" in err


# -- item 10: report options that name nothing are errors -------------------------------------
def _run_folder(root: Path) -> Path:
    from tests.test_report_flips import ARM_A, _bench, _eval_json

    run = root / "run"
    stage = run / "eval-0123456789ab"
    _eval_json(stage / "eval" / "a", _bench(root / "bench"), ARM_A)
    (stage / "configurations.json").write_text(json.dumps({"models": {"A": "a"}}))
    (run / "stages.json").write_text(json.dumps({"eval": stage.name}))
    return run


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--review", "{ROOT}/nope.jsonl"], "error: {ROOT}/nope.jsonl: file: does not exist"),
        (["--metrics", "nosuchmetric"], "error: --metrics 'nosuchmetric': no metric"),
        (["--metrics", "paired,nosuch"], "error: --metrics 'nosuch': no metric"),
    ],
    ids=["missing-review", "unknown-metric", "one-unknown-metric"],
)
def test_report_options_that_match_nothing_are_errors(option, expected, tmp_path, capsys):
    run = _run_folder(tmp_path)
    out = tmp_path / "r"
    option = [o.replace("{ROOT}", str(tmp_path)) for o in option]
    base = ["report", str(run), "--out", str(out), "--compare", "none", "--flips", "none"]
    code, err = invoke([*base, *option], capsys)
    assert code == 2 and err.startswith(expected.replace("{ROOT}", str(tmp_path))), err
    assert not out.exists()
    assert invoke([*base, "--metrics", "paired"], capsys)[0] == 0  # a known prefix still works


def test_report_files_never_replace_a_verdict_file_it_reads(tmp_path, capsys) -> None:
    run, out = _run_folder(tmp_path), tmp_path / "r"
    out.mkdir()
    verdicts = _verdicts(out)
    (out / "report.md").symlink_to(verdicts)
    before = verdicts.read_bytes()
    code, err = invoke(["report", str(run), "--out", str(out), "--review", str(verdicts)], capsys)
    refused(code, err, out / "report.md")
    assert verdicts.read_bytes() == before


# -- items 21 and 22: numbers out of range from a server or a reviewer ------------------------
def _backend(url: str, **extra) -> OpenAIBackend:
    return OpenAIBackend(BackendConfig(kind="openai", model="stub", base_url=url, **extra))


def _ask(backend: OpenAIBackend, limit_s: float):
    async def go():
        try:
            return await asyncio.wait_for(
                backend.complete([{"role": "user", "content": "hi"}], SamplingParams()), limit_s
            )
        finally:
            await backend.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("tokens", ["1e999", "-1e999", "NaN", '"12x"', "1e300"])
def test_a_usage_count_out_of_range_counts_as_zero(tokens: str) -> None:
    body = (
        '{"choices": [{"message": {"content": "fine"}}], '
        f'"usage": {{"prompt_tokens": {tokens}, "completion_tokens": 3}}}}'
    )
    with StubServer(lambda request: StubReply(body=body)) as server:
        completion = _ask(_backend(server.base_url, max_retries=0), 20)
    assert completion.text == "fine" and completion.tokens_out == 3
    assert completion.tokens_in == (int(1e300) if tokens == "1e300" else 0)


@pytest.mark.parametrize("retry_after", ["999999", "1e999", "inf", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_retry_after_never_waits_longer_than_retry_max_s(retry_after: str) -> None:
    reply = StubReply(status=429, headers={"Retry-After": retry_after})
    with StubServer(lambda request: reply) as server:
        backend = _backend(server.base_url, max_retries=1, timeout_s=4, retry_max_s=0.2)
        started = time.perf_counter()
        with pytest.raises(TransientBackendError, match="HTTP 429"):
            _ask(backend, 15)  # unbounded: asyncio.TimeoutError after 15 s instead
        assert server.requests == 2
    assert time.perf_counter() - started < 5
    assert parse_retry_after(retry_after, cap=0.2) == 0.2
    assert parse_retry_after("nan") is None and parse_retry_after("-3") == 0.0


@pytest.mark.parametrize("index", ["1e999", "-1e999", "NaN", "1.0", "true", '"0"'])
def test_a_verdict_index_that_is_not_an_integer_is_a_400(index: str, tmp_path: Path) -> None:
    from dualview.review.app import create_app
    from dualview.review.items import load_review_set

    data = write_dv_file(tmp_path / "dv.jsonl", {"law": 2})
    review = load_review_set(str(data), n=2, seed=0)
    client = TestClient(create_app(review, "ann"), base_url="http://127.0.0.1")
    item = review.items[0].id
    body = f'{{"index": {index}, "item": "{item}", "reviewer": "ann", "verdict": "valid"}}'
    headers = {"content-type": "application/json"}
    response = client.post("/api/verdict", content=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"].startswith("index: expected the item's number (an integer)")
    assert not Path(review.verdicts).exists()


def _surrogate_reply(request: dict) -> StubReply:
    reply = default_reply(request)
    reply.text = reply.text.replace("Only passages", "Only \ud800 passages")
    return reply


def test_a_lone_surrogate_in_a_server_reply_is_replaced_and_the_job_finishes(
    tmp_path, capsys
) -> None:
    """An LLM's reply is not a user's file: a lone surrogate escape in it ("\\ud800") becomes
    U+FFFD, the cache is written and the parser rejects the answer as invalid text, with its
    reason in the dropped file (before: writing the cache stopped synth with an error)."""
    src, out = _records(tmp_path), tmp_path / "o.jsonl"
    with StubServer(_surrogate_reply) as server:
        code, err = invoke(
            ["reverse", str(src), "-o", str(out), *LLM, server.base_url, *FAST], capsys
        )
    assert code == 0, err
    dropped_text = Path(f"{out}.dropped.jsonl").read_text(encoding="utf-8")
    dropped = [json.loads(line) for line in dropped_text.splitlines()]
    assert dropped and all(d["reason"].startswith("invalid_text") for d in dropped)
    assert "Only \ufffd passages" in dropped[0]["raw"][0]
    assert Path(f"{out}.cache.jsonl").stat().st_size > 0
