"""The README's commands work as written.

Every ``dualview`` command of the README's bash blocks (also after ``torchrun ... -m`` and
``accelerate launch ... -m``) is classified below, and a new one must be added here:

- ``run``: runs on CPU as written, in a scratch folder holding small stand-ins for the files
  the README names (``orig.jsonl``, ``units.jsonl``, ...);
- ``estimate``: needs an LLM server or a GPU, so runs in its dry form (``--estimate`` for
  the synthesis commands, ``dualview run --dry-run`` for experiments);
- ``parse``: too slow for a unit test (training, evaluation, a review server, the local
  LLM's benchmark): its arguments are parsed by the CLI, and a training config given with
  its ``--set`` overrides must validate.

The README's DeepSpeed recipe is applied to every shipped training config and must validate.
"""

from __future__ import annotations

import itertools
import re
import shlex
import shutil
from pathlib import Path

import click
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from dualview.cli import app
from dualview.config import load_config
from dualview.data.jsonl import iter_records
from dualview.io.atomic import write_jsonl
from dualview.train.config import TrainConfig
from tests.conftest import FIXTURES, REPO_ROOT, SHARED_DATA

README = REPO_ROOT / "README.md"

# command words -> how the test exercises it
KIND = {
    ("data", "convert"): "run",
    ("data", "validate"): "run",
    ("data", "stats"): "parse",  # needs bert-base-uncased's tokenizer from the Hub
    ("seed",): "estimate",
    ("reverse",): "estimate",
    ("synth",): "estimate",  # the old name of reverse (a deprecation line, then the same)
    ("verify",): "estimate",
    ("poison",): "estimate",
    ("bench-synth",): "parse",  # the local 0.5B LLM, minutes
    ("review", "stats"): "parse",  # needs a verdict file of a review session
    ("review",): "parse",  # serves a web page until stopped
    ("mix",): "run",
    ("mine",): "parse",  # encodes a corpus with MiniLM, minutes
    ("export",): "run",
    ("train",): "parse",
    ("eval",): "parse",
    ("run",): "estimate",
    ("report",): "parse",  # needs finished runs
}
# Commands that need a run's output folder or a GPU cluster to mean anything run as parse.
NEEDS_RUN = ("--reuse-from",)


def _expand_braces(token: str) -> list[str]:
    match = re.search(r"\{([^{}]*,[^{}]*)\}", token)
    if not match:
        return [token]
    head, tail = token[: match.start()], token[match.end() :]
    return [x for part in match.group(1).split(",") for x in _expand_braces(head + part + tail)]


def readme_commands() -> list[list[str]]:
    """The argument lists of every ``dualview`` command in the README's bash blocks."""
    text = README.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if "dualview" not in argv:
                continue
            start = argv.index("dualview") + 1
            args = [x for token in argv[start:] for x in _expand_braces(token)]
            found.append(args)
    return found


COMMANDS = readme_commands()


def _words(args: list[str]) -> tuple[str, ...]:
    for size in (2, 1):
        if tuple(args[:size]) in KIND:
            return tuple(args[:size])
    raise AssertionError(f"README command not classified in this test: dualview {args}")


def _kind(args: list[str]) -> str:
    kind = KIND[_words(args)]
    if kind == "estimate" and args[0] == "run" and any(a in args for a in NEEDS_RUN):
        return "parse"
    if kind == "estimate" and args[0] == "run" and "--dry-run" not in args:
        return "estimate"  # the same experiment, in dry-run form
    return kind


def _parse(args: list[str]) -> click.Context:
    """Parse ``args`` with the CLI's own parser (unknown options, missing arguments and bad
    values fail) without running the command."""
    ctx = get_command(app).make_context("dualview", list(args))
    while isinstance(ctx.command, click.Group):
        rest = [*ctx._protected_args, *ctx.args]
        name, sub, rest = ctx.command.resolve_command(ctx, rest)
        ctx = sub.make_context(name, rest, parent=ctx)
    return ctx


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A folder with stand-ins for the README's files, where ``../shared/data`` resolves."""
    root = tmp_path_factory.mktemp("readme") / "repo"
    root.mkdir()
    (root.parent / "shared").symlink_to(SHARED_DATA.parent)
    for name in ("configs", "src"):
        (root / name).symlink_to(REPO_ROOT / name)
    shutil.copy(FIXTURES / "formats" / "promptriever.jsonl", root / "promptriever_rows.jsonl")
    # the paper configs' input, which the README has the user download first
    (root / "data" / "promptriever").mkdir(parents=True)
    shutil.copy(FIXTURES / "formats" / "promptriever.jsonl", root / "data/promptriever/train.jsonl")
    # the job file the README gives in a comment
    job = re.search(r"# job\.yaml: (\{.*\})", README.read_text(encoding="utf-8"))
    assert job, "the README's job.yaml comment moved"
    (root / "job.yaml").write_text(job.group(1) + "\n", encoding="utf-8")
    return root


def _prepare(root: Path, args: list[str]) -> list[str]:
    """Stand-in inputs the command reads (written afresh: an earlier README command may have
    written its own ``orig.jsonl``); the dry form of commands that need a server."""
    records = list(iter_records(FIXTURES / "synth" / "orig.jsonl"))
    dvs = list(iter_records(FIXTURES / "train" / "dv_small.jsonl"))
    write_jsonl(root / "in.jsonl", records)
    if "--skip-invalid" in args:
        with (root / "in.jsonl").open("a", encoding="utf-8") as handle:
            handle.write('{"id": "broken"}\n')
    if args[:2] != ["data", "convert"]:
        write_jsonl(root / "units.jsonl", dvs)
        write_jsonl(root / "out.jsonl", dvs)
        write_jsonl(root / "dv.jsonl", [r for r in dvs if r.view == "dv"])
        write_jsonl(root / "orig.jsonl", [r for r in dvs if r.view == "orig"] + records)
    if args[0] in ("seed", "reverse", "synth", "verify", "poison") and "--estimate" not in args:
        return [*args, "--estimate"]
    if args[0] == "run" and "--dry-run" not in args:
        return [*args, "--dry-run"]
    return args


def test_every_readme_command_is_classified_and_parses() -> None:
    assert len(COMMANDS) >= 30, "the README's commands were not found"
    for args in COMMANDS:
        _words(args)
        ctx = _parse(args)
        assert ctx.command.name, args


@pytest.mark.parametrize(
    "args",
    [a for a in COMMANDS if _kind(a) in ("run", "estimate")],
    ids=lambda a: " ".join(a)[:60],
)
def test_readme_command_runs(args: list[str], scratch: Path, monkeypatch) -> None:
    monkeypatch.chdir(scratch)
    monkeypatch.setenv("MY_KEY", "readme-test-key")
    argv = _prepare(scratch, args)
    if args[0] == "mix":  # the README's size is for real data; the fixture has 8 pairs
        argv = [("16" if prev == "--size" else a) for prev, a in itertools.pairwise(["", *argv])]
    result = CliRunner().invoke(app, argv, catch_exceptions=False)
    assert result.exit_code == 0, f"dualview {' '.join(argv)}\n{result.output[-3000:]}"
    if "--estimate" in argv or "--dry-run" in argv:
        assert "LLM call(s)" in result.output or args[0] == "run"


def _train_commands() -> list[list[str]]:
    return [a for a in COMMANDS if a[0] == "train"]


@pytest.mark.parametrize("args", _train_commands(), ids=lambda a: a[1])
def test_readme_train_configs_validate_with_their_overrides(args: list[str]) -> None:
    config = REPO_ROOT / args[1]
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    load_config(TrainConfig, config, sets)


def _deepspeed_recipe() -> list[str]:
    text = " ".join(README.read_text(encoding="utf-8").split())
    match = re.search(r"DeepSpeed ZeRO-2: `([^`]+)`", text)
    assert match, "the README's DeepSpeed recipe moved"
    return shlex.split(match.group(1))[1::2]  # the values after each --set


@pytest.mark.parametrize("config", sorted((REPO_ROOT / "configs" / "train").glob("*.yaml")))
def test_readme_deepspeed_recipe_validates_on_every_shipped_config(config: Path) -> None:
    sets = _deepspeed_recipe()
    assert any(s.startswith("deepspeed_config=") for s in sets)
    loaded = load_config(TrainConfig, config, sets)
    assert loaded.deepspeed_config is not None and loaded.gradcache_chunk_size is None


def test_deepspeed_with_gradcache_is_a_config_error_naming_the_fix() -> None:
    from dualview.errors import ConfigError

    paper = REPO_ROOT / "configs" / "train" / "gte-multilingual-mlm-base-ins-dv.yaml"
    with pytest.raises(ConfigError, match="gradcache_chunk_size=null"):
        load_config(TrainConfig, paper, ["deepspeed_config=configs/deepspeed/zero2.json"])
