"""A task's parser version is derived from its source (`dualview.synth.parser_versions`):
editing a task's code without pinning the new digest can never reuse stale LLM verdicts,
and caches made before the version was derived keep their keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualview.data.jsonl import iter_records
from dualview.synth import parser_versions
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.backends.openai_http import OpenAIBackend
from dualview.synth.jobs import TASKS
from dualview.synth.parser_versions import (
    PINNED,
    _tree_digest,
    class_name,
    parser_digest,
    pinned_class,
)
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import Runner, RunnerConfig
from dualview.synth.task import TemplateTask
from dualview.synth.testing import StubServer
from tests.helpers import pin_parser_edit

FIXTURE = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"

# The fingerprints of the built-in tasks with their default settings before the version was
# derived (the template's sha256 and the parser version then declared by hand).
BEFORE = {
    "reverse": "97282b812753caf07b661099224a50b80bec2801c2ec207332e7a9d7bdccb46e",
}


def _builtin_task_classes() -> list[type]:
    classes = {type(TASKS.get(name).build(TASKS.get(name).config())) for name in TASKS.names()}
    return sorted((c for c in classes if c.__module__.startswith("dualview.")), key=class_name)


def test_every_builtin_tasks_source_is_pinned() -> None:
    classes = _builtin_task_classes()
    assert {class_name(c) for c in classes if issubclass(c, TemplateTask)} <= PINNED.keys()
    for cls in classes:
        pinned = pinned_class(cls)
        if pinned is None:
            continue
        digest = parser_digest(pinned)
        versions = PINNED[class_name(pinned)]
        assert digest in versions, (
            f"the source of {class_name(pinned)} (its module or dualview.synth.parsing) "
            f"changed: add '{digest}': {max(versions.values()) + 1} to its entry of PINNED in "
            "src/dualview/synth/parser_versions.py (the cached answers of older versions are "
            "then re-judged; if the prompts built in code changed too, also set REPLAY_FROM "
            "for it to that version so they are asked again)"
        )


def test_todays_versions_keep_the_keys_of_caches_made_before() -> None:
    fingerprint = ReverseTask().fingerprint()
    # version 5 (a worked example's original instruction rejected) is on purpose: its caches
    # replay the answers of 4 and below, the template's key is unchanged
    assert fingerprint["template"] == BEFORE["reverse"] and fingerprint["parser_version"] == 5
    assert "parser_source" not in fingerprint
    assert [f["parser_version"] for f in ReverseTask().earlier_fingerprints()[:2]] == [4, 3]


def test_docstrings_comments_and_layout_leave_the_digest_unchanged() -> None:
    code = 'def f(x):\n    """Doc."""\n    return x + 1\n'
    same = "def f(x):  # note\n\n    return (x\n            + 1)\n"
    assert _tree_digest(code) == _tree_digest(same)
    assert _tree_digest(code) != _tree_digest(code.replace("+ 1", "+ 2"))


def _run(out: Path, url: str) -> None:
    task = ReverseTask()
    backend = OpenAIBackend(BackendConfig(kind="openai", model="stub", base_url=url))
    runner = Runner(task, backend, SamplingParams(), RunnerConfig(concurrency=4))
    runner.run(lambda: task.units(iter_records(FIXTURE)), out)


def test_an_unpinned_edit_asks_the_llm_again(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "dv.jsonl"
    with StubServer() as server:
        _run(out, server.base_url)
        asked = server.requests
        _run(out, server.base_url)
        assert server.requests == asked  # same source: every answer from the cache
        monkeypatch.setattr(parser_versions, "parser_digest", lambda cls: "edited")
        assert ReverseTask().earlier_fingerprints() == []  # nothing replayed
        assert ReverseTask().fingerprint()["parser_source"] == "edited"
        _run(out, server.base_url)
        assert server.requests == 2 * asked  # asked again, not judged from stale verdicts


@pytest.mark.parametrize("replay_from", [1, 6])
def test_a_pinned_edit_rejudges_or_asks_again(monkeypatch, replay_from: int) -> None:
    version = pin_parser_edit(monkeypatch, ReverseTask, replay_from)
    task = ReverseTask()
    assert task.fingerprint()["parser_version"] == version == 6
    assert "parser_source" not in task.fingerprint()
    earlier = [f.get("parser_version", 1) for f in task.earlier_fingerprints()]
    assert earlier == ([5, 4, 3, 2, 1] if replay_from == 1 else [])
