"""dualview: instruction-following retrieval with dual-view training data.

The Python API (`dualview.api`, see ``docs/api.md``) is reached from here and loaded on first
use, so ``import dualview`` (and ``dualview --help``) imports no torch::

    import dualview
    dv = dualview.synthesize("orig.jsonl", backend="local")
    results = dualview.evaluate("embedded:minilm", ["paired=data/paired"])

``dualview.train`` and ``dualview.report`` are also the names of subpackages: those two
subpackages are made callable (`_CallableModule`), so ``dualview.train(config, records)``
calls `dualview.api.train` whether or not ``dualview.train.trainer`` has been imported, and
``dualview.train.trainer`` stays the module it is.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

#: The names `dualview.api` provides at the top level.
API = (
    "EvalResults",
    "ExperimentRun",
    "MiningResult",
    "SynthesisResult",
    "TrainedModel",
    "evaluate",
    "mine",
    "read_records",
    "report",
    "run_experiment",
    "synthesize",
    "train",
)
#: API functions named like a subpackage: the subpackage module is made callable.
_CALLABLE_PACKAGES = ("report", "train")


def _api() -> types.ModuleType:
    """`dualview.api`, imported on first use."""
    return importlib.import_module("dualview.api")


class _CallableModule(types.ModuleType):
    """A subpackage that is also the API function of the same name (``dualview.train``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the API function named like this subpackage."""
        return getattr(_api(), self.__name__.rpartition(".")[2])(*args, **kwargs)

    @property
    def __signature__(self) -> Any:  # what help() and notebooks show
        """The signature of the API function (what ``help`` and notebooks show)."""
        import inspect

        return inspect.signature(getattr(_api(), self.__name__.rpartition(".")[2]))


class _Package(types.ModuleType):
    """The ``dualview`` module: binding a subpackage named like an API function (the import
    system sets it as an attribute) makes that subpackage callable."""

    def __setattr__(self, name: str, value: Any) -> None:
        """Set ``name``; a subpackage named like an API function becomes callable."""
        if name in _CALLABLE_PACKAGES and type(value) is types.ModuleType:
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


def __getattr__(name: str) -> Any:
    """The API's names, loaded on first use (PEP 562)."""
    if name in _CALLABLE_PACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in API:
        return getattr(_api(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the API's (for completion in notebooks)."""
    return sorted({*globals(), *API})


sys.modules[__name__].__class__ = _Package
