"""The examples of docs/api.md run, in order, as one notebook: on the test fixtures, with the
tiny encoder of ``tests/train_tiny.py`` in place of ``embedded:minilm`` (same code, faster)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO_ROOT

DOC = REPO_ROOT / "docs" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
API = ("read_records", "synthesize", "train", "evaluate", "mine", "run_experiment", "report")


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order."""
    return BLOCK.findall(text)


def test_python_blocks_are_found() -> None:
    text = "a\n```python\nx = 1\n```\n```text\nno\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = 2\n"]


def test_every_api_function_has_an_example() -> None:
    code = "".join(python_blocks(DOC.read_text(encoding="utf-8")))
    missing = [name for name in API if f"dualview.{name}(" not in code]
    assert not missing, f"docs/api.md has no example of {missing}"


@pytest.mark.slow  # trains two arms and evaluates three models: tiny, but the whole flow
def test_the_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from tests.train_tiny import make_tiny_encoder

    tiny = make_tiny_encoder(tmp_path / "tiny", dropout=0.0)
    shutil.copy(FIXTURES / "synth" / "orig.jsonl", tmp_path / "orig.jsonl")
    shutil.copytree(FIXTURES / "eval" / "paired", tmp_path / "eval" / "paired")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_api"}
    for number, block in enumerate(python_blocks(DOC.read_text(encoding="utf-8")), 1):
        code = block.replace('"embedded:minilm"', repr(str(tiny)))
        exec(compile(code, f"docs/api.md python block {number}", "exec"), namespace)
    out = capsys.readouterr().out
    run, files = namespace["run"], namespace["files"]
    assert (run.run_dir / "stages.json").is_file() and run.report is not None
    assert files.markdown.is_file() and "| Ins-DV |" in files.markdown.read_text()
    assert "p-MRR" in out and "eval-out" in out
    assert len(namespace["mined"].records) == 8  # limit=8 of the fixture's 20
