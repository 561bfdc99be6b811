"""Loading a Hugging Face model or tokenizer by name or folder, with one located error.

Every model family builds its backbone and tokenizer through `from_pretrained`, and the
sentence-transformers loader (`dualview.retrieval.encode.load_sentence_transformer`) words its
failures with `ModelLoadError`, so a folder that does not exist, one that holds no model, or a
Hub name that cannot be reached offline reads the same wherever it is named::

    model.name_or_path: cannot load model '/nope': no such folder

`load_complete` also refuses a checkpoint whose weights do not cover the model it is loaded
as (Hugging Face would initialise the missing ones at random and only warn): a saved folder
of one kind read as another is an error, not a model with a random head.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dualview.errors import ConfigError
from dualview.resources import resolve_model_path

#: The config key that names the backbone of a trained model.
NAME_KEY = "model.name_or_path"
#: Missing weight names shown in an error (the rest are counted).
_SHOWN = 3

T = TypeVar("T")


class ModelLoadError(ConfigError):
    """A model that cannot be loaded: ``[KEY: ]cannot load model NAME: REASON``."""

    def __init__(self, name: str, reason: str, key: str | None = None) -> None:
        self.name = name
        self.reason = reason
        self.key = key
        where = f"{key}: " if key else ""
        super().__init__(f"{where}cannot load model {name!r}: {reason}")


def _names_a_path(name: str) -> bool:
    """True for a name that can only be a local path (never a Hub id ``org/name``)."""
    return Path(name).expanduser().is_absolute() or name.startswith((".", "~"))


def load_failure_reason(name: str, exc: BaseException) -> str:
    """One line saying why ``name`` did not load (``exc``: what the library raised)."""
    if _names_a_path(name) and not Path(name).expanduser().exists():
        return "no such folder"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def from_pretrained(
    loader: Callable[..., T], name: str, key: str | None = NAME_KEY, **kwargs: Any
) -> T:
    """``loader(path, **kwargs)`` (``AutoModel.from_pretrained``, ``AutoTokenizer...``) for
    ``name`` (``embedded:minilm`` resolved); a failure is a `ModelLoadError` naming ``key``."""
    try:
        return loader(resolve_model_path(name), **kwargs)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(name, load_failure_reason(name, exc), key) from None


def load_complete(
    loader: Callable[..., Any], name: str, key: str | None = NAME_KEY, **kwargs: Any
) -> Any:
    """Like `from_pretrained` for a model, but every weight of the model must come from the
    checkpoint: missing ones (a folder of another kind) are a `ModelLoadError`."""
    model, info = from_pretrained(loader, name, key, output_loading_info=True, **kwargs)
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        shown = ", ".join(missing[:_SHOWN]) + (", ..." if len(missing) > _SHOWN else "")
        saved_as = getattr(model.config, "architectures", None) or ["unknown"]
        raise ModelLoadError(
            name,
            f"{len(missing)} weight(s) of {type(model).__name__} are not in the folder "
            f"({shown}); its weights are a {', '.join(saved_as)}: another kind of model",
            key,
        )
    return model
