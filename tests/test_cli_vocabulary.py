"""One flag vocabulary (docs/cli.md), old spellings for one release, ``--limit``, and help that
reads at 80 columns (issue 34, items 9 and 10)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.main import get_command

from dualview.cli import app
from dualview.cli.vocabulary import RENAMED_COMMANDS, RENAMED_OPTIONS, rewrite_args
from dualview.io.atomic import write_jsonl
from dualview.review.store import make_verdict
from tests.conftest import FIXTURES
from tests.helpers import invoke_in_process

ORIG = FIXTURES / "synth" / "orig.jsonl"  # 20 orig records
DV = FIXTURES / "train" / "dv_small.jsonl"  # 8 orig + 8 dv records
BEIR = FIXTURES / "formats" / "beir-mini"
PAIRED = FIXTURES / "eval" / "paired"
LLM = ["--model", "stub", "--base-url", "http://127.0.0.1:9/v1", "--estimate"]


def _commands(command=None, path=()):  # type: ignore[no-untyped-def]
    """(words, click command) of every visible command and subcommand of ``dualview``."""
    command = command or get_command(app)
    for name, sub in getattr(command, "commands", {}).items():
        if sub.hidden:
            continue
        yield (*path, name), sub
        yield from _commands(sub, (*path, name))


COMMANDS = {" ".join(words): command for words, command in _commands()}
PYTHON_TYPE = re.compile(r"<(list\[|bool>|str>|int>|float>|path>)|\['")


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_at_80_columns_names_every_option_in_full(path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = invoke_in_process([*path.split(), "--help"], capsys)
    assert code == 0, err
    assert not PYTHON_TYPE.search(out), out
    assert not re.search(r"\S…", out), out  # no name cut short
    assert max(len(line) for line in out.splitlines()) <= 80, out
    tokens = set(re.findall(r"-[-\w]+", out))
    for param in COMMANDS[path].params:
        if not getattr(param, "hidden", False) and param.param_type_name == "option":
            assert set(param.opts + param.secondary_opts) <= tokens, (param.opts, out)


def test_the_old_command_name_is_hidden_from_the_command_list(capsys) -> None:
    code, out, _ = invoke_in_process(["--help"], capsys)
    assert code == 0 and " reverse " in out and " synth " not in out


# -- the rewrite: old argv -> new argv, one warning per old spelling -------------------------
def _rewritten(words: str, args: list[str], capsys) -> tuple[list[str], list[str]]:
    command = get_command(app)
    for word in words.split():
        command = command.commands[word]  # type: ignore[attr-defined]
    new = rewrite_args(words, command, args)
    return new, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("words", "old", "new", "warnings"),
    [
        ("synth", ["a", "b", "--backend", "x"], ["a", "--llm-backend", "x", "--out", "b"], 2),
        ("seed", ["a", "--cache=c", "b"], ["a", "--llm-cache=c", "--out", "b"], 2),
        ("synth-merge", ["m", "s1", "s2"], ["s1", "s2", "--out", "m"], 1),
        ("eval", ["m", "--no-cache", "--backend", "torch"],
         ["m", "--no-embedding-cache", "--search-backend", "torch"], 2),
        ("review serve", ["f", "--n", "3"], ["f", "--size", "3"], 1),
        ("review stats", ["v", "--json", "o"], ["v", "--out", "o"], 1),
        ("data split-beir", ["s", "a", "b", "--n", "1"], ["s", "a", "b", "--size", "1"], 1),
        # an option's value is never taken for an old flag or for the output
        ("verify", ["a", "--model", "--backend", "-o", "b"],
         ["a", "--model", "--backend", "-o", "b"], 0),
        ("export", ["a", "--to", "hf", "b"], ["a", "--to", "hf", "--out", "b"], 1),
        ("data convert", ["a", "--", "b"], ["a", "--", "b"], 0),  # after --: positionals
        ("reverse", ["a", "-o", "b"], ["a", "-o", "b"], 0),
    ],
)  # fmt: skip
def test_old_spellings_are_rewritten_with_one_warning_each(
    words, old, new, warnings, capsys
) -> None:
    args, lines = _rewritten(words, old, capsys)
    assert args == new
    assert len(lines) == warnings, lines
    assert all(line.startswith("warning: ") and "deprecated: use " in line for line in lines)


def test_every_renamed_option_exists_under_its_new_name() -> None:
    for words, renamed in RENAMED_OPTIONS.items():
        command = COMMANDS[words]
        names = {o for p in command.params for o in p.opts + getattr(p, "secondary_opts", [])}
        assert set(renamed.values()) <= names, words
        assert not set(renamed) & names, f"{words}: an old name is still a real option"
    assert set(RENAMED_COMMANDS.values()) <= set(COMMANDS)


# -- end to end: the old and the new spelling do the same, only the old one warns ------------
def _verdicts(root: Path) -> Path:
    item = {"item": "i0", "stratum": "s", "judge": "valid", "expected": None}
    write_jsonl(root / "v.jsonl", [make_verdict(item, "ann", "valid", None, "")])
    return root / "v.jsonl"


CASES = {
    "synth": (
        ["synth", str(ORIG), "{R}/o.jsonl", "--backend", "openai", "--cache", "{R}/c", *LLM],
        ["reverse", str(ORIG), "-o", "{R}/o.jsonl", "--llm-backend", "openai",
         "--llm-cache", "{R}/c", *LLM],
        4,
    ),
    "convert": (
        ["data", "convert", str(ORIG), "{R}/o.jsonl"],
        ["data", "convert", str(ORIG), "--out", "{R}/o.jsonl"],
        1,
    ),
    "export": (
        ["export", str(DV), "{R}/o.parquet"],
        ["export", str(DV), "-o", "{R}/o.parquet"],
        1,
    ),
    "split-beir": (
        ["data", "split-beir", str(BEIR), "{R}/a", "{R}/b", "--n", "1"],
        ["data", "split-beir", str(BEIR), "{R}/a", "{R}/b", "--size", "1"],
        1,
    ),
    "review-export": (
        ["review", "export", str(DV), "--out", "{R}/r.md", "--n", "2"],
        ["review", "export", str(DV), "-o", "{R}/r.md", "--size", "2"],
        1,
    ),
    "review-stats": (
        ["review", "stats", "{R}/v.jsonl", "--json", "{R}/s.json"],
        ["review", "stats", "{R}/v.jsonl", "-o", "{R}/s.json"],
        1,
    ),
}  # fmt: skip


def _run(argv: list[str], root: Path, capsys) -> tuple[str, str, dict[str, bytes]]:
    root.mkdir()
    _verdicts(root)
    code, out, err = invoke_in_process([a.replace("{R}", str(root)) for a in argv], capsys)
    assert code == 0, err
    files = {
        str(p.relative_to(root)): p.read_bytes().replace(str(root).encode(), b"R")
        for p in root.rglob("*")
        if p.is_file()
    }
    files.pop("v.jsonl")  # the verdicts read by review stats (ids and times of their own)
    return out.replace(str(root), "R"), err, files


@pytest.mark.parametrize("case", sorted(CASES))
def test_old_and_new_spellings_do_the_same(case, tmp_path, capsys) -> None:
    old, new, warnings = CASES[case]
    old_out, old_err, old_files = _run(old, tmp_path / "old", capsys)
    new_out, new_err, new_files = _run(new, tmp_path / "new", capsys)
    assert "deprecated" not in new_err
    lines = [line for line in old_err.splitlines() if "deprecated" in line]
    assert len(lines) == warnings and all(line.startswith("warning: ") for line in lines)
    assert old_out == new_out
    if case != "export":  # Parquet files hold their write time
        assert old_files == new_files


# -- --limit N: only the first N records are read ----------------------------------------------
def _head(path: Path, n: int, root: Path) -> Path:
    head = root / f"head-{n}.jsonl"
    head.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))
    return head


@pytest.mark.parametrize(("command", "source"), [("seed", ORIG), ("reverse", ORIG),
                                                  ("poison", ORIG), ("verify", DV)])  # fmt: skip
def test_limit_reads_only_the_first_records(command, source, tmp_path, capsys) -> None:
    base = [command, "--llm-backend", "openai", *LLM, "-o", str(tmp_path / "o.jsonl")]
    n = 5
    code, limited, err = invoke_in_process([*base, str(source), "--limit", str(n)], capsys)
    assert code == 0, err
    code, head, err = invoke_in_process([*base, str(_head(source, n, tmp_path))], capsys)
    assert code == 0, err
    code, full, err = invoke_in_process([*base, str(source)], capsys)
    assert code == 0, err
    assert limited == head != full


def test_limit_on_a_real_synthesis_run_writes_only_n_records(tmp_path, capsys) -> None:
    from dualview.synth.testing import StubServer

    out = tmp_path / "dv.jsonl"
    with StubServer() as server:
        argv = ["reverse", str(ORIG), "-o", str(out), "--llm-backend", "openai",
                "--model", "stub", "--base-url", server.base_url, "--limit", "3"]  # fmt: skip
        code, _, err = invoke_in_process(argv, capsys)
        assert code == 0, err
        assert server.requests == 3
    stats = json.loads(Path(f"{out}.stats.json").read_text())
    assert stats["units"] == 3


def test_mine_limit_mines_only_the_first_records(tmp_path, capsys) -> None:
    from tests.train_tiny import make_tiny_encoder

    model = make_tiny_encoder(tmp_path / "tiny")
    config = tmp_path / "mine.yaml"
    config.write_text(json.dumps({"model": str(model), "num_negatives": 2, "rank_end": 5}))
    out = tmp_path / "m.jsonl"
    argv = ["mine", str(ORIG), "-o", str(out), "--config", str(config), "--limit", "4"]
    code, _, err = invoke_in_process([*argv, "--device", "cpu"], capsys)
    assert code == 0, err
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    first = [json.loads(line)["id"] for line in ORIG.read_text().splitlines()[:4]]
    assert ids == first
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["limit"] == 4 and manifest["config"]["device"] == "cpu"


def test_limit_must_be_positive(tmp_path, capsys) -> None:
    argv = ["reverse", str(ORIG), "-o", str(tmp_path / "o"), "--limit", "0", *LLM]
    code, _, err = invoke_in_process(argv, capsys)
    assert code == 2 and "--limit" in err


def _counts(folder: Path) -> dict:
    (result,) = [json.loads(p.read_text()) for p in folder.glob("bm25/*.json")]
    return result["counts"]


def test_eval_limit_evaluates_the_first_queries_of_each_set(tmp_path, capsys) -> None:
    """``eval --limit N``: N pairs of a paired set, N queries of each FollowIR set; a limited
    result is never reused for a full run (its settings say the limit)."""
    demo = Path(__file__).resolve().parents[1] / "src" / "dualview" / "demo" / "data" / "eval"
    base = ["eval", "--first-stage", "bm25", "-o", str(tmp_path / "e")]
    for spec, key in (("paired", "pairs"), ("followir", "followir/queries")):
        argv = [*base, "-b", f"{spec}={demo / spec}", "--no-embedding-cache"]
        code, _, err = invoke_in_process([*argv, "--limit", "2"], capsys)
        assert code == 0, err
        assert _counts(tmp_path / "e")[key] == 2
        code, _, err = invoke_in_process(argv, capsys)
        assert code == 0, err
        assert _counts(tmp_path / "e")[key] > 2  # recomputed in full, not the limited one
        shutil.rmtree(tmp_path / "e")


def _query_ids(folder: Path) -> set[str]:
    (result,) = [json.loads(p.read_text()) for p in folder.glob("bm25/*.json")]
    return set(next(iter(result["per_query"].values())))


def test_eval_skip_evaluates_a_slice_disjoint_from_limit(tmp_path, capsys) -> None:
    """``eval --skip N --limit M``: queries N+1..N+M of a set (fewer where the set ends),
    none of a ``--limit N`` run's,
    and a skipped result is never reused for an unskipped run (its settings say the skip)."""
    base = ["eval", "--first-stage", "bm25", "-b", f"beir={BEIR}", "--no-embedding-cache"]
    code, _, err = invoke_in_process([*base, "-o", str(tmp_path / "all")], capsys)
    assert code == 0, err
    every = _query_ids(tmp_path / "all")
    assert len(every) == 2
    code, _, err = invoke_in_process([*base, "-o", str(tmp_path / "e"), "--limit", "1"], capsys)
    assert code == 0, err
    first = _query_ids(tmp_path / "e")
    code, _, err = invoke_in_process(
        [*base, "-o", str(tmp_path / "e"), "--skip", "1", "--limit", "5"], capsys
    )
    assert code == 0, err
    sliced = _query_ids(tmp_path / "e")
    assert len(first) == 1 and first | sliced == every and not first & sliced
    (result,) = [json.loads(p.read_text()) for p in (tmp_path / "e").glob("bm25/*.json")]
    assert result["settings"]["skip"] == 1 and result["settings"]["limit"] == 5
    code, _, err = invoke_in_process([*base, "-o", str(tmp_path / "e"), "--skip", "-1"], capsys)
    assert code == 2 and "--skip" in err
