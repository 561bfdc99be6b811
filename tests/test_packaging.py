"""Install paths: --version, and the local backend without llama-cpp-python says how to add it."""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

import pytest

from dualview import __version__
from dualview.errors import DualviewError
from dualview.synth.backends import local
from dualview.synth.backends.local_engines import LLAMA_CPP_INSTALL, LlamaCppEngine, ModelFile
from tests.helpers import run_cli


def test_version_prints_the_installed_version() -> None:
    done = run_cli("--version", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dualview {__version__}"


def test_auto_engine_without_llama_cpp_falls_back_and_says_how_to_add_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with caplog.at_level(logging.WARNING):
        engine = local.choose_engine("auto", ModelFile(tmp_path / "m.gguf", is_gguf=True))
    assert engine == "transformers"
    assert LLAMA_CPP_INSTALL in caplog.text
    assert "pip install 'dualview[llm]'" in LLAMA_CPP_INSTALL


def test_llama_cpp_engine_without_the_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails
    with pytest.raises(DualviewError) as info:
        LlamaCppEngine(ModelFile(tmp_path / "m.gguf", is_gguf=True), 512, 1)
    assert LLAMA_CPP_INSTALL in str(info.value) and "engine: transformers" in str(info.value)
