"""Ray Data LLM's vLLM processor as the engine (``engine: ray``, ``backend.kind: vllm``).

vLLM needs a GPU, so the processor here is a stand-in with the same contract. It takes the
Ray Dataset of requests through dualview's own preprocess (`request_row`), answers each row
with the stub LLM as vLLM's stage would (``generated_text``, ``num_input_tokens``,
``num_generated_tokens``), and applies dualview's postprocess (`answer_row`). What is tested
is everything around the engine. Reverse + verify give the same output, byte for byte, as
the local runner with the same answers. Verify's several questions per unit go out in
rounds. A run that dies mid-job is finished by a rerun with nothing lost or duplicated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.data.jsonl import iter_records
from dualview.errors import ConfigError, DualviewError
from dualview.io.atomic import write_jsonl
from dualview.synth.backends.base import BackendConfig, Completion, SamplingParams
from dualview.synth.engines import build_engine
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import Runner, RunnerConfig, make_runner
from dualview.synth.testing import prompt_of
from dualview.synth.verify import VerifyTask
from tests.test_synth_kill import JitteredStub, make_records
from tests.test_synth_ray import cluster, expected_outcomes, outputs  # noqa: F401 (fixture)

ray = pytest.importorskip("ray")

UNITS = 120
BACKEND = BackendConfig(kind="vllm", model="stub")


def _usage(request: dict, text: str) -> tuple[int, int]:
    return len(prompt_of(request).split()), len(text.split())


class StubProcessor:
    """Ray Data in, Ray Data out, like ``build_processor(vLLMEngineProcessorConfig(...))``."""

    def __init__(self, fail_on_round: int | None = None) -> None:
        self.responder = JitteredStub()
        self.fail_on_round = fail_on_round
        self.rounds = 0

    def __call__(self, dataset):
        from dualview.synth.engines.ray_vllm import answer_row, request_row

        self.rounds += 1
        if self.rounds == self.fail_on_round:
            raise RuntimeError("the GPU node went away")
        rows = []
        for row in dataset.map(request_row).take_all():
            assert set(row["sampling_params"]) >= {"temperature", "max_tokens", "seed"}
            text = self.responder({"messages": row["messages"]}).text
            tokens_in, tokens_out = _usage({"messages": row["messages"]}, text)
            engine = {"generated_text": text, "num_input_tokens": tokens_in}
            rows.append({**row, **engine, "num_generated_tokens": tokens_out})
        return ray.data.from_items(rows).map(answer_row)


class InProcessStub:
    """The same answers for the local runner, under the same model identity."""

    identity = "vllm:stub"

    def __init__(self) -> None:
        self.responder = JitteredStub()

    async def complete(self, messages, params: SamplingParams) -> Completion:
        text = self.responder({"messages": messages}).text
        return Completion(text, *_usage({"messages": messages}, text))

    async def aclose(self) -> None:
        return None


def run_stage(task, source: Path, out: Path, processor: StubProcessor | None) -> tuple:
    config = RunnerConfig(engine="ray", ray_batch_size=16, ray_vllm_window=50)
    if processor is None:
        runner = Runner(task, InProcessStub(), SamplingParams(), config)
    else:
        engine = build_engine(BACKEND, config, processor=processor)
        runner = Runner(task, engine, SamplingParams(), config)
    return runner.run(lambda: task.units(iter_records(source)), out), runner


def pipeline(source: Path, root: Path, processor: StubProcessor | None) -> list:
    root.mkdir(exist_ok=True)
    first = run_stage(ReverseTask(), source, root / "reverse.jsonl", processor)
    second = run_stage(VerifyTask(), root / "reverse.jsonl", root / "verify.jsonl", processor)
    return [first, second]


@pytest.mark.slow
def test_vllm_processor_engine_matches_the_local_runner_and_resumes(tmp_path: Path, cluster):  # noqa: F811
    source = tmp_path / "in.jsonl"
    write_jsonl(source, make_records(UNITS))
    local = pipeline(source, tmp_path / "local", None)
    processor = StubProcessor()
    on_ray = pipeline(source, tmp_path / "ray", processor)
    assert outputs(tmp_path / "ray") == outputs(tmp_path / "local")
    for (ours, _), (theirs, _) in zip(on_ray, local, strict=True):
        assert ours.outcomes == theirs.outcomes and ours.complete
        assert ours.model == "vllm:stub"
    nonzero = {k: v for k, v in local[0][0].outcomes.items() if v}
    assert nonzero == expected_outcomes(make_records(UNITS))
    # Reverse asks once per unit: one round per window of 50 units (120 units: 3 windows).
    assert on_ray[0][1].engine.rounds == 3
    # Verify asks once per view of a pair, one after the other: two rounds per window.
    assert on_ray[1][1].engine.rounds > 3

    # A job that dies in verify's third round (the second window): the rerun finishes it.
    root = tmp_path / "died"
    root.mkdir()
    run_stage(ReverseTask(), source, root / "reverse.jsonl", StubProcessor())
    with pytest.raises(RuntimeError, match="went away"):
        run_stage(VerifyTask(), root / "reverse.jsonl", root / "verify.jsonl", StubProcessor(3))
    cache = root / "verify.jsonl.cache.jsonl"
    done_before = cache.read_text().count("\n")
    assert 0 < done_before < (on_ray[1][0].input_units or 0), "the first window should be cached"
    resumed, _ = run_stage(VerifyTask(), root / "reverse.jsonl", root / "verify.jsonl", processor)
    assert outputs(root) == outputs(tmp_path / "local")
    assert resumed.this_run_units == (resumed.input_units or 0) - done_before
    keys = [json.loads(line)["key"] for line in cache.open()]
    assert len(keys) == len(set(keys)) == resumed.input_units  # none lost, none twice


def test_the_engine_is_chosen_by_backend_kind_and_refuses_rate_limits(cluster) -> None:  # noqa: F811
    from dualview.synth.engines.ray_vllm import RayVLLMEngine

    config = RunnerConfig(engine="ray")
    with pytest.raises(DualviewError, match=r"dualview\[vllm\]"):  # no vllm here: how to add it
        make_runner(ReverseTask(), BACKEND, SamplingParams(), config)
    limited = RunnerConfig(engine="ray", requests_per_minute=60)
    with pytest.raises(ConfigError, match="rate limits"):
        RayVLLMEngine(BACKEND, limited, processor=StubProcessor())
