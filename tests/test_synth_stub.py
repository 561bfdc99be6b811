"""The runner and the OpenAI-compatible backend against a real HTTP stub on 127.0.0.1.

Every record's query carries a script name; the stub answers by script: valid, impossible,
many malformed kinds, 429 with Retry-After, 500, a hang past the client timeout. The counts of
every outcome and the reason of every rejection are asserted exactly.

Nothing depends on the machine's speed: the client timeout is long except in the hang test,
where the stub holds its answer until the test releases it, so every attempt times out.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from dualview.data.schema import Document, Record
from dualview.io.atomic import write_jsonl
from dualview.synth.backends.base import BackendConfig, BackendError, SamplingParams
from dualview.synth.backends.openai_http import OpenAIBackend
from dualview.synth.reverse import ReverseConfig, ReverseTask
from dualview.synth.runner import Runner, RunnerConfig
from dualview.synth.testing import StubReply, StubServer, prompt_of

ORIGINAL = "Only passages written for experts are relevant."
GOOD = (
    "<answer><new_instruction>Only passages written for beginners count.</new_instruction></answer>"
)

# script -> (answer text, expected status, expected reason code)
ANSWERS = {
    "valid": (GOOD, "ok", ""),
    "valid_chatty": ("Sure! Here it is.\n" + GOOD + "\n", "ok", ""),
    "impossible": ("<answer>None</answer>", "impossible", "impossible"),
    "impossible_lower": ("I tried.\n<answer> none. </answer>", "impossible", "impossible"),
    "no_tags": ("Only passages written for beginners count.", "rejected", "no_answer"),
    "unclosed": ("<answer><new_instruction>Beginners only", "rejected", "no_answer"),
    "empty": (
        "<answer><new_instruction>  </new_instruction></answer>",
        "rejected",
        "empty_instruction",
    ),
    "same": (
        f"<answer><new_instruction>{ORIGINAL}</new_instruction></answer>",
        "rejected",
        "same_as_original",
    ),
    "echo": (
        "<answer><new_instruction>...your new instruction here...</new_instruction></answer>",
        "rejected",
        "echoes_prompt",
    ),
    "too_long": (
        "<answer><new_instruction>" + "very " * 300 + "long</new_instruction></answer>",
        "rejected",
        "absurd_length",
    ),
    "too_short": (
        "<answer><new_instruction>Beginners</new_instruction></answer>",
        "rejected",
        "absurd_length",
    ),
    "stray_text": (
        "<answer>Here: <new_instruction>Beginners only, please.</new_instruction></answer>",
        "rejected",
        "malformed",
    ),
    "two_answers": (GOOD + "<answer>None</answer>", "rejected", "multiple_answers"),
    "nested": (
        "<answer><new_instruction>Beginners <b>only</b> here</new_instruction></answer>",
        "rejected",
        "malformed",
    ),
    "two_fields": (
        "<answer><new_instruction>Beginners only here.</new_instruction>"
        "<new_instruction>Experts only here.</new_instruction></answer>",
        "rejected",
        "malformed",
    ),
}
# HTTP behaviours: (list of replies per attempt, then the last one repeats), expected status.
RETRY_AFTER = 0.3


def http_script(name: str, attempt: int) -> StubReply | None:
    if name == "rate_limited":  # two 429s with Retry-After, then fine
        if attempt < 2:
            return StubReply(status=429, headers={"Retry-After": str(RETRY_AFTER)})
        return StubReply(GOOD)
    if name == "flaky_500":  # one 500, then fine
        return StubReply(status=500) if attempt == 0 else StubReply(GOOD)
    if name == "always_500":
        return StubReply(status=503)
    if name == "bad_json":
        return StubReply(body="{not json")
    return None


HTTP_EXPECTED = {
    "rate_limited": "ok",
    "flaky_500": "ok",
    "always_500": "error",
    "bad_json": "error",
}


class Script:
    """The stub's responder: looks up the record's script in the prompt, counts attempts."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.times: dict[str, list[float]] = defaultdict(list)
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> StubReply:
        name = re.search(r"Query: case (\w+)", prompt_of(request)).group(1)
        with self.lock:
            attempt = self.attempts[name]
            self.attempts[name] += 1
            self.times[name].append(time.monotonic())
        reply = http_script(name, attempt)
        return reply if reply is not None else StubReply(ANSWERS[name][0])


def make_record(name: str, with_negative: bool = True) -> Record:
    return Record(
        id=f"r-{name}",
        view="orig",
        query=f"case {name}",
        instruction=ORIGINAL,
        positives=[Document(id=f"{name}-p", text="A deep technical treatise for specialists.")],
        instruction_negatives=(
            [Document(id=f"{name}-n", text="A friendly first introduction for newcomers.")]
            if with_negative
            else []
        ),
        hard_negatives=[Document(id=f"{name}-h", text="An unrelated passage about weather.")],
    )


def fast_backend(url: str, **extra) -> OpenAIBackend:
    """Short retry waits; a client timeout no healthy answer comes near on a slow machine."""
    config = {
        "kind": "openai",
        "model": "stub",
        "base_url": url,
        "timeout_s": 60.0,
        "max_retries": 2,
        "retry_base_s": 0.01,
        "retry_max_s": 0.5,  # caps Retry-After too: above the stub's RETRY_AFTER
    }
    return OpenAIBackend(BackendConfig(**{**config, **extra}))


def run_reverse(
    tmp_path: Path, url: str, records: list[Record], concurrency: int = 8, **backend
) -> dict:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, records)
    runner = Runner(
        ReverseTask(ReverseConfig()),
        fast_backend(url, **backend),
        SamplingParams(),
        RunnerConfig(concurrency=concurrency),
    )
    from dualview.data.jsonl import iter_records

    return runner.run(
        lambda: ReverseTask(ReverseConfig()).units(iter_records(source)), tmp_path / "out.jsonl"
    )


def test_every_scripted_outcome_is_counted_exactly(tmp_path: Path) -> None:
    names = list(ANSWERS) + list(HTTP_EXPECTED)
    records = [make_record(n) for n in names] + [make_record("skipme", with_negative=False)]
    script = Script()
    with StubServer(script) as server:
        stats = run_reverse(tmp_path, server.base_url, records)
        requests_first = server.requests

    expected = Counter({s: 0 for s in ("ok", "impossible", "rejected", "skipped", "error")})
    expected.update(ANSWERS[n][1] for n in ANSWERS)
    expected.update(HTTP_EXPECTED.values())
    expected["skipped"] += 1
    assert dict(stats.outcomes.items()) == dict(expected)
    assert stats.complete is False  # errors remain to be retried

    # Every rejection carries the reason its script provokes.
    dropped = {
        row["id"]: row
        for row in map(json.loads, (tmp_path / "out.jsonl.dropped.jsonl").read_text().splitlines())
    }
    for name, (_, status, code) in ANSWERS.items():
        if status == "ok":
            assert f"r-{name}" not in dropped
        else:
            assert dropped[f"r-{name}"]["status"] == status
            assert dropped[f"r-{name}"]["reason"].split(":")[0] == code, name
    assert dropped["r-skipme"]["reason"] == "no instruction negative"
    assert "HTTP 503" in dropped["r-always_500"]["reason"]

    # Output: one dv record per ok unit, in input order, with parent and N* noted.
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["parent_id"] for r in out] == [
        "r-valid",
        "r-valid_chatty",
        "r-rate_limited",
        "r-flaky_500",
    ]
    assert all(r["view"] == "dv" and r["meta"]["n_star_id"] == r["positives"][0]["id"] for r in out)

    # Retries: 429 twice then ok (waiting Retry-After each time), 500 once, 503 until give-up.
    assert script.attempts["rate_limited"] == 3
    times = script.times["rate_limited"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= RETRY_AFTER * 0.95
    assert script.attempts["flaky_500"] == 2
    assert script.attempts["always_500"] == 3  # max_retries=2 -> 3 attempts
    assert script.attempts["valid"] == 1
    assert script.attempts.get("skipme", 0) == 0
    assert stats.llm_calls == sum(
        1 for s in expected.elements() if s in ("ok", "impossible", "rejected")
    )

    # A rerun is free for everything cached; only the error units are asked again.
    with StubServer(script) as server:
        again = run_reverse(tmp_path, server.base_url, records)
        retried = server.requests
    assert again.outcomes == stats.outcomes
    assert retried == 3 + 3  # always_500 (3 attempts), bad_json (3)
    assert requests_first > retried
    assert (tmp_path / "out.jsonl").read_text().count("\n") == 4


def test_a_hang_past_the_client_timeout_is_retried_then_an_error(tmp_path: Path) -> None:
    release, in_flight = threading.Event(), threading.Event()
    attempts = Counter()

    def hang(request: dict) -> StubReply:
        attempts["hang"] += 1
        in_flight.set()  # the stub holds a request now
        return StubReply(GOOD, hold=release)

    with StubServer(hang) as server:
        stats = run_reverse(tmp_path, server.base_url, [make_record("hang")], timeout_s=0.5)
        assert in_flight.is_set()
        release.set()  # the held handlers answer (to closed connections) before the stop
    assert stats.outcomes.error == 1 and stats.outcomes.ok == 0
    assert attempts["hang"] == 3  # max_retries=2: three attempts, each held past the timeout
    [row] = map(json.loads, (tmp_path / "out.jsonl.dropped.jsonl").read_text().splitlines())
    assert row["id"] == "r-hang" and "timed out" in row["reason"]


def test_non_retryable_4xx_fails_fast_without_leaking_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-SECRET-4242"
    monkeypatch.setenv("DV_TEST_KEY", secret)
    seen_auth: list[str] = []

    def unauthorized(request: dict) -> StubReply:
        seen_auth.append("x")
        return StubReply(status=401, body=json.dumps({"error": f"bad key {secret}"}))

    with StubServer(unauthorized) as server:
        backend = fast_backend(server.base_url, api_key_env="DV_TEST_KEY")
        source = tmp_path / "in.jsonl"
        write_jsonl(source, [make_record(f"n{i}") for i in range(20)])
        from dualview.data.jsonl import iter_records

        runner = Runner(ReverseTask(), backend, SamplingParams(), RunnerConfig(concurrency=2))
        started = time.monotonic()
        with pytest.raises(BackendError) as caught:
            runner.run(lambda: ReverseTask().units(iter_records(source)), tmp_path / "o.jsonl")
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "HTTP 401" in message and secret not in message and "***" in message
    assert len(seen_auth) <= 3  # stopped at once, not after 20 records x retries


def test_missing_key_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DV_ABSENT_KEY", raising=False)
    with pytest.raises(BackendError, match="DV_ABSENT_KEY"):
        OpenAIBackend(
            BackendConfig(
                kind="openai", model="m", base_url="http://x", api_key_env="DV_ABSENT_KEY"
            )
        )


def test_cli_reports_backend_failure_in_one_line(tmp_path: Path) -> None:
    with StubServer(lambda request: StubReply(status=404)) as server:
        source = tmp_path / "in.jsonl"
        write_jsonl(source, [make_record("a")])
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "from dualview.cli import main; main()",
                "reverse",
                str(source),
                "-o",
                str(tmp_path / "o.jsonl"),
                "--llm-backend",
                "openai",
                "--base-url",
                server.base_url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 404" in lines[0] and "Traceback" not in result.stderr
