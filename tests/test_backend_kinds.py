"""LLM backends and synthesis tasks by registration (issue 32, items 3 and 5): each backend
kind brings its own config class, so a setting of another kind is a located error; a kind or
a task registered from outside the package is accepted by job configs and becomes a command;
the LLM cache keys of the committed configs are those of the flat config that came before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import yaml
from typer.main import get_command

from dualview.cli import synth as synth_cli
from dualview.config import validate_config
from dualview.errors import ConfigError
from dualview.synth.backends import BACKENDS, BackendConfig, build_backend
from dualview.synth.backends import local as local_backend
from dualview.synth.backends.openai_http import OpenAIConfig
from dualview.synth.bench import BenchConfig
from dualview.synth.jobs import TASKS, build_task, job_model
from dualview.synth.runner import make_runner
from tests.plugins.dualview_example_plugin import backend as echo
from tests.plugins.dualview_example_plugin import task as restate

ROOT = Path(__file__).parent.parent
SECTIONS = {"seeding": "seed", "synthesis": "reverse", "verification": "verify"}
#: (backend identity, job fingerprint) of each LLM job of the committed configs, computed by
#: the code before backends had one config class per kind (commit 1950b34, flat
#: BackendConfig): equal keys mean the LLM caches those runs wrote are reused as they are.
#: The reverse jobs' keys moved on purpose with the reverse parser's version 5; their old
#: keys are among the runner's replay keys, so the cached answers are still used.
#: The local engine is pinned to openvino (``auto`` picks by what is installed).
BEFORE = {
    "configs/experiments/gold-cpu-llm.yaml:synthesis": (
        "local:openvino:embedded:qwen2.5-coder-0.5b:1d9614638d18024d",
        "b56361417df186b1a6b07df386ba7b35378fb49861befd75eb4ad07cfd139899",
    ),
    "configs/experiments/gold-cpu-llm.yaml:verification": (
        "local:openvino:embedded:qwen2.5-coder-0.5b:1d9614638d18024d",
        "2eb5ef0f3c32dec7a67467ec45a5897815726c0efe0d0bfc05362e0041289293",
    ),
    "configs/experiments/msmarco-cpu.yaml:seeding": (
        "local:openvino:embedded:qwen2.5-coder-0.5b:1d9614638d18024d",
        "f38191ef9258b01c1b3db5c26d45ce5ab8a2879a75aff701e50eb5b959934081",
    ),
    "configs/experiments/msmarco-cpu.yaml:synthesis": (
        "local:openvino:embedded:qwen2.5-coder-0.5b:1d9614638d18024d",
        "b56361417df186b1a6b07df386ba7b35378fb49861befd75eb4ad07cfd139899",
    ),
    "configs/experiments/msmarco-cpu.yaml:verification": (
        "local:openvino:embedded:qwen2.5-coder-0.5b:1d9614638d18024d",
        "2eb5ef0f3c32dec7a67467ec45a5897815726c0efe0d0bfc05362e0041289293",
    ),
    "configs/experiments/paper-bge-m3.yaml:synthesis": (
        "openai:Qwen/Qwen3-Next-80B-A3B-Instruct",
        "8d8d1fd0d21c5dd2871007b49fe163793c4af03298e93d5b0bace0bd40733e0f",
    ),
    "configs/experiments/paper-gte-multilingual.yaml:synthesis": (
        "openai:Qwen/Qwen3-Next-80B-A3B-Instruct",
        "8d8d1fd0d21c5dd2871007b49fe163793c4af03298e93d5b0bace0bd40733e0f",
    ),
    "src/dualview/demo/demo.yaml:synthesis": (
        "local:openvino:embedded:qwen2.5-coder-0.5b:1d9614638d18024d",
        "b56361417df186b1a6b07df386ba7b35378fb49861befd75eb4ad07cfd139899",
    ),
    # two jobs with the settings of one kind each: a pool of endpoints, a local engine
    "pool": (
        "openai:m",
        "3597d3bfbdadeecec0a9902d9d0234073086cbb86d4ae561683c4393c9104697",
    ),
    "local": (
        "local:llama_cpp:embedded:qwen2.5-coder-1.5b:cc324af070c2ecbf",
        "d430bf6c2ecde096f662ca5d799bc293d25212bc868c475079ec14778f4e333c",
    ),
}
EXTRA_JOBS = {
    "pool": (
        "reverse",
        {
            "backend": {
                "kind": "openai",
                "model": "m",
                "base_url": ["http://a/v1", "http://b/v1"],
                "trip_after": 2,
            }
        },
    ),
    "local": (
        "seed",
        {"backend": {"model": "embedded:qwen2.5-coder-1.5b", "engine": "llama_cpp", "n_ctx": 2048}},
    ),
}


@pytest.fixture
def plugin() -> Iterator[None]:
    """The example plugin's backend and task, registered for one test."""
    BACKENDS.register("echo", echo.KIND)
    TASKS.register("restate", restate.KIND)
    yield
    BACKENDS.remove("echo")
    TASKS.remove("restate")


def _committed_jobs() -> Iterator[tuple[str, str, dict]]:
    files = [*sorted(ROOT.glob("configs/experiments/*.yaml")), ROOT / "src/dualview/demo/demo.yaml"]
    for path in files:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for section, task in SECTIONS.items():
            job = (data.get(section) or {}).get("job")
            if job is not None:
                yield f"{path.relative_to(ROOT).as_posix()}:{section}", task, job
    for name, (task, job) in EXTRA_JOBS.items():
        yield name, task, job


def test_llm_cache_keys_of_the_committed_configs_are_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DUALVIEW_LLM_KEY", "not-a-key")  # the paper configs' api_key_env
    monkeypatch.setattr(
        local_backend, "choose_engine", lambda asked, _: "openvino" if asked == "auto" else asked
    )
    gguf = local_backend.ModelFile(Path("model.gguf"), is_gguf=True)  # no model is read
    monkeypatch.setattr(local_backend, "resolve_local_model", lambda _: gguf)
    compared = 0
    for name, task, job in _committed_jobs():
        config = validate_config(job_model(task), job, name)
        runner = make_runner(
            build_task(task, config), config.backend, config.sampling, config.runner
        )
        # configs added since that commit build too, but have no earlier key to compare with
        if name not in BEFORE:
            continue
        identity, key = BEFORE[name]
        assert runner.backend.identity == identity, name
        if task == "reverse":  # parser version 5 since: the old answers are replayed to it
            assert key != runner.fingerprint and key in runner.replay_fingerprints, name
        else:
            assert key == runner.fingerprint, name
        compared += 1
    assert compared == len(BEFORE)


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        (
            {"kind": "local", "timeout_s": 300},
            "job.yaml: backend.timeout_s: not a setting of backend kind 'local' "
            "(its settings: kind, model, engine, n_threads, n_ctx)",
        ),
        (
            {"model": "embedded:qwen2.5-coder-0.5b", "base_url": "http://x/v1"},  # kind: local
            "job.yaml: backend.base_url: not a setting of backend kind 'local'",
        ),
        (
            {"kind": "openai", "base_url": "http://x/v1", "n_ctx": 8192},
            "job.yaml: backend.n_ctx: not a setting of backend kind 'openai'",
        ),
        (
            {"kind": "vllm", "engine": "openvino"},
            "job.yaml: backend.engine: not a setting of backend kind 'vllm'",
        ),
        (
            {"kind": "ollama"},
            "job.yaml: backend.kind: unknown backend kind 'ollama'; known: local, openai, vllm",
        ),
    ],
)
def test_a_setting_of_another_backend_kind_is_a_located_error(backend: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config(job_model("reverse"), {"backend": backend}, "job.yaml")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_backend_config_builds_the_config_class_of_its_kind() -> None:
    config = BackendConfig(kind="openai", model="m", base_url="http://x/v1", timeout_s=5)
    assert type(config) is OpenAIConfig and config.timeout_s == 5
    assert type(BackendConfig()) is local_backend.LocalConfig  # kind: local, as before
    with pytest.raises(ConfigError, match="unknown backend kind 'nope'"):
        BackendConfig(kind="nope")
    job = validate_config(job_model("verify"), {"backend": config.model_dump()}, "j")
    assert job.backend == config
    dumped = job.model_dump(mode="json")["backend"]  # every setting of its kind, none other
    assert dumped == {**config.model_dump(mode="json")} and dumped["timeout_s"] == 5


def test_every_config_holding_a_backend_dumps_the_settings_of_its_kind() -> None:
    settings = {"kind": "openai", "model": "m", "base_url": "http://x/v1", "timeout_s": 5.0}
    job = validate_config(job_model("seed"), {"backend": settings}, "job.yaml")
    both = {"backend": settings, "judge_backend": settings}
    bench = validate_config(BenchConfig, both, "bench.yaml").model_dump(mode="json")
    for dumped in (
        job.model_dump(mode="json")["backend"],
        bench["backend"],
        bench["judge_backend"],
    ):
        assert dumped == OpenAIConfig(**settings).model_dump(mode="json")


def test_a_registered_backend_kind_is_configured_built_and_dumped(plugin: None) -> None:
    job = validate_config(
        job_model("reverse"), {"backend": {"kind": "echo", "prefix": "> "}}, "job.yaml"
    )
    assert isinstance(job.backend, echo.EchoConfig) and job.backend.prefix == "> "
    again = validate_config(job_model("reverse"), job.model_dump(mode="json"), "dump")
    assert again.backend == job.backend  # the dump keeps the kind's own settings
    backend = build_backend(job.backend)
    assert isinstance(backend, echo.EchoBackend) and backend.identity.endswith(":> ")
    with pytest.raises(ConfigError, match=r"backend\.n_threads: not a setting of backend kind"):
        validate_config(job_model("reverse"), {"backend": {"kind": "echo", "n_threads": 2}}, "j")


def _commands(register) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    app = typer.Typer()
    register(app)
    return {name: command.help for name, command in get_command(app).commands.items()}


def test_task_commands_come_from_the_registry(plugin: None, capsys) -> None:  # type: ignore[no-untyped-def]
    commands = _commands(synth_cli.register)
    assert {"seed", "reverse", "poison", "verify", "restate", "synth-merge"} <= set(commands)
    assert commands["restate"] == restate.KIND.help
    job = validate_config(job_model("restate"), {"task": {"suffix": "-x"}}, "job.yaml")
    assert build_task("restate", job).config.suffix == "-x"
    with pytest.raises(ConfigError, match=r"task: unknown synthesis task 'nope'; known: .*restate"):
        job_model("nope")


def test_a_task_cannot_take_the_name_of_another_command(capsys) -> None:  # type: ignore[no-untyped-def]
    TASKS.register("synth-merge", restate.KIND)
    try:
        commands = _commands(synth_cli.register)
    finally:
        TASKS.remove("synth-merge")
    assert commands["synth-merge"] != restate.KIND.help  # still the merge command
    assert "synthesis task 'synth-merge' has no command" in capsys.readouterr().err
