"""Install paths: --version, and the local backend without its engines says how to add them."""

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
from dualview.synth.backends.openvino_engine import OPENVINO_INSTALL, OpenVINOEngine
from tests.helpers import run_cli


def test_version_prints_the_installed_version() -> None:
    done = run_cli("--version", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dualview {__version__}"


def _hide_modules(monkeypatch: pytest.MonkeyPatch, hidden: set[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util,
        "find_spec",
        lambda name, *a: None if name in hidden else real(name, *a),
    )


def test_auto_engine_prefers_an_installed_llama_cpp_then_openvino(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = ModelFile(tmp_path / "m.gguf", is_gguf=True)
    real = importlib.util.find_spec
    monkeypatch.setattr(  # both "installed", whatever this environment has
        local.importlib.util,
        "find_spec",
        lambda name, *a: object() if name in ("llama_cpp", "openvino_genai") else real(name, *a),
    )
    assert local.choose_engine("auto", model) == "llama_cpp"
    _hide_modules(monkeypatch, {"llama_cpp"})
    assert local.choose_engine("auto", model) == "openvino"


def test_auto_engine_without_fast_engines_falls_back_and_says_how_to_add_them(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    _hide_modules(monkeypatch, {"llama_cpp", "openvino_genai"})
    with caplog.at_level(logging.WARNING):
        engine = local.choose_engine("auto", ModelFile(tmp_path / "m.gguf", is_gguf=True))
    assert engine == "transformers"
    assert LLAMA_CPP_INSTALL in caplog.text and OPENVINO_INSTALL in caplog.text
    assert "pip install 'dualview[llamacpp]'" in LLAMA_CPP_INSTALL


def test_llama_cpp_engine_without_the_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails
    with pytest.raises(DualviewError) as info:
        LlamaCppEngine(ModelFile(tmp_path / "m.gguf", is_gguf=True), 512, 1)
    assert LLAMA_CPP_INSTALL in str(info.value) and "engine: transformers" in str(info.value)


def test_openvino_engine_without_the_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "openvino_genai", None)  # import fails
    with pytest.raises(DualviewError) as info:
        OpenVINOEngine(ModelFile(tmp_path / "m.gguf", is_gguf=True), 512, 1, sha256="0" * 64)
    assert OPENVINO_INSTALL in str(info.value) and "engine: transformers" in str(info.value)


def test_openvino_engine_refuses_a_hugging_face_folder(tmp_path: Path) -> None:
    with pytest.raises(DualviewError, match=r"needs a \.gguf file"):
        OpenVINOEngine(ModelFile(tmp_path, is_gguf=False), 512, 1)
