"""``--estimate``: LLM calls and tokens predicted before a job runs, checked against the usage
a run against the stub server records (OUT.stats.json tokens_in / tokens_out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from dualview.data.jsonl import iter_records
from dualview.errors import ConfigError, DualviewError
from dualview.io.atomic import write_jsonl
from dualview.pipeline.build import read_source
from dualview.pipeline.estimate import estimate_experiment
from dualview.pipeline.experiment import Experiment
from dualview.pipeline.params import SynthParams
from dualview.pipeline.stages import Stage
from dualview.synth.estimate import (
    APPROX_LABEL,
    TokenCounter,
    approx_tokens,
    common_prefix,
    finish,
    parse_price,
    parse_tokens_per_s,
)
from dualview.synth.jobs import estimate_job, load_job, run_job
from dualview.synth.testing import StubServer
from tests.helpers import run_cli

FIXTURES = Path(__file__).parent / "fixtures"
ORIG = FIXTURES / "synth" / "orig.jsonl"
BEIR = FIXTURES / "formats" / "beir-mini"
# The stub reports usage as whitespace-separated words; count the same way to compare.
WORDS = TokenCounter(
    "words", lambda m: sum(len(x["content"].split()) for x in m), lambda t: len(t.split())
)


def _stub_job(task: str, url: str):
    return load_job(task, None, ["backend.kind=openai", "backend.model=stub",
                                 f"backend.base_url={url}", "runner.concurrency=4"])  # fmt: skip


def _check(task: str, source: Path, out: Path, url: str, fmt: str = "dualview") -> dict:
    job = _stub_job(task, url)
    estimate = estimate_job(task, job, source, fmt, counter=WORDS)
    stats = run_job(task, job, source, out, fmt)
    recorded = json.loads(out.with_name(out.name + ".stats.json").read_text())
    assert recorded["tokens_in"] == stats.tokens_in
    assert estimate.calls == stats.llm_calls > 0
    assert estimate.units == stats.units
    assert estimate.prompt_tokens == pytest.approx(stats.tokens_in, rel=0.10)
    assert estimate.completion_tokens == pytest.approx(stats.tokens_out, rel=0.10)
    assert estimate.completion_bound == estimate.calls * job.sampling.max_tokens
    return {"estimate": estimate, "stats": stats}


def test_estimates_match_stub_usage_for_every_task(tmp_path: Path) -> None:
    records = list(iter_records(ORIG))
    lone = records[0].model_copy(update={"id": "no-negative", "instruction_negatives": []})
    origs = tmp_path / "orig.jsonl"
    write_jsonl(origs, [*records, lone])
    with StubServer() as server:
        seed = _check("seed", BEIR, tmp_path / "seed.jsonl", server.base_url, "beir")
        synth = _check("reverse", origs, tmp_path / "dv.jsonl", server.base_url)
        _check("poison", origs, tmp_path / "infir.jsonl", server.base_url)
        verify = _check("verify", tmp_path / "dv.jsonl", tmp_path / "kept.jsonl", server.base_url)
    # reverse skips records without an instruction negative: no call for them
    assert synth["estimate"].calls == synth["stats"].outcomes.ok < synth["estimate"].units
    # verify judges a lone dual view under both instructions: two calls per unit
    assert verify["estimate"].calls == 2 * verify["estimate"].units
    # the templates' instructions and worked examples are a prefix every prompt shares
    for figures in (seed, synth, verify):
        assert 0.1 < figures["estimate"].shared_share < 1.0


def test_approximation_price_and_hours() -> None:
    assert approx_tokens("") == 0 and approx_tokens("abcde") == 2
    assert common_prefix("abcX", "abcY") == "abc" and common_prefix("a", "") == ""
    assert parse_price("0.1,0.4") == (0.1, 0.4)
    for bad in ("1", "a,b", "1,2,3", "-1,2"):
        with pytest.raises(ConfigError, match="IN,OUT"):
            parse_price(bad)
    from dualview.synth.estimate import Estimate

    estimate = Estimate("reverse", 10, 10, 2_000_000, 500_000, 5_120, 1_000_000, APPROX_LABEL)
    finish(estimate, parse_price("0.10,0.40"), 1250.0)
    assert estimate.cost == pytest.approx(0.2 + 0.2)
    assert estimate.server_hours == pytest.approx(2_500_000 / 1250 / 3600)
    assert estimate.shared_share == 0.5
    with pytest.raises(ConfigError, match="> 0"):
        parse_tokens_per_s("0")


def test_cli_estimate_prints_figures_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "dv.jsonl"
    result = run_cli("synth", str(ORIG), str(out), "--backend", "openai", "--model", "none",
                     "--base-url", "http://127.0.0.1:9/v1", "--estimate",
                     "--price-per-mtok", "0.10,0.40", "--server-tokens-per-s", "2000")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "LLM call(s)" in result.stdout and APPROX_LABEL in result.stdout
    assert "cost" in result.stdout and "server time" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_run_dry_run_estimates_every_llm_stage(tmp_path: Path) -> None:
    config = Path(__file__).parents[1] / "configs" / "experiments" / "gold-cpu-llm.yaml"
    result = run_cli("run", str(config), "--dry-run", "--set", f"run_dir={tmp_path / 'run'}",
                     "--set", "synthesis.limit=10", "--price-per-mtok", "1,2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    # 10 gold orig records reversed; each dual view judged with its orig: 2 calls per unit
    assert "estimate for reverse: 10 unit(s), 10 LLM call(s)" in result.stdout
    assert "estimate for verify: 10 unit(s), 20 LLM call(s)" in result.stdout
    assert result.stdout.count("cost") == 2
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_tokenizer_counts_when_the_model_loads_offline() -> None:
    from dualview.resources import embedded_encoder_path
    from dualview.synth.backends.base import BackendConfig

    folder = str(embedded_encoder_path())  # a local tokenizer (no chat template)
    counter = TokenCounter.for_backend(BackendConfig(kind="openai", model=folder))
    assert counter.label == f"tokenizer of {folder}"
    assert counter.text("tides and the moon") == 4  # word pieces, no special tokens
    assert counter.prompt([{"role": "user", "content": "tides and the moon"}]) == 6  # [CLS] [SEP]
    unknown = TokenCounter.for_backend(BackendConfig(kind="openai", model="no/such-model"))
    assert unknown.label == APPROX_LABEL


def _seeding_experiment(verify_only: bool) -> Experiment:
    job = {"backend": {"kind": "openai", "model": "stub"}}
    data: dict = {
        "name": "est",
        "seeding": {"source": {"path": str(BEIR), "format": "beir"}, "job": job},
        "synthesis": {"job": job, "limit": 2, "enabled": not verify_only},
        "verification": {"enabled": True, "job": job},
        "mixes": [{"name": "m", "preset": "ins-orig", "size": 4}],
        "training": {"config": {"data": {"train_file": "x"}, "output_dir": "x"}},
        "evaluation": {"benchmarks": ["phenomena"]},
    }
    return Experiment.model_validate(data)


def test_the_dry_run_estimates_the_llm_stages_of_the_stage_graph() -> None:
    seed, reverse, verify = estimate_experiment(_seeding_experiment(False))
    plain = len(list(read_source(_seeding_experiment(False).seeding.source)))
    assert (seed.task, reverse.task, verify.task) == ("seed", "reverse", "verify")
    assert seed.units == plain and reverse.units == 2  # synthesis.limit of the seeded origs
    assert verify.units == 2 and verify.calls == 4  # each dual view with its orig
    # without synthesis, verify judges the dual views of the data stage (none when seeded)
    assert [e.task for e in estimate_experiment(_seeding_experiment(True))] == ["seed", "verify"]


def test_an_llm_stage_the_dry_run_cannot_follow_is_an_error() -> None:
    class Other(SynthParams):
        TASK: ClassVar[str] = "poison"

    exp = _seeding_experiment(False)
    stages = [Stage("other", lambda out, up: None, params=Other(job={}, task={}))]
    with pytest.raises(DualviewError, match="other: the dry run cannot estimate"):
        estimate_experiment(exp, stages)


def test_the_dry_run_estimates_a_log_odds_judge() -> None:
    """The stand-in backend scores answers (one prompt pass per passage and order), so a
    ``verify.scoring: logodds`` stage is estimated, not refused."""
    from dualview.pipeline.experiment import load_experiment

    config = Path(__file__).parents[1] / "configs" / "experiments" / "gold-cpu-llm.yaml"
    overrides = ["synthesis.limit=3", "verification.job.task.scoring=logodds",
                 "verification.job.task.distractors=0"]  # fmt: skip
    reverse, verify = estimate_experiment(load_experiment(config, overrides))
    assert reverse.calls == 3 and verify.units == 3
    # per unit 2 scenarios x (at least P+ and N*) x 2 orders of the texts, no generation
    assert verify.calls >= 3 * 8 and verify.completion_tokens == 0
    assert verify.prompt_tokens > 0
