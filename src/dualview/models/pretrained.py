"""Loading a Hugging Face model or tokenizer by name or folder, with one located error.

Every model family builds its backbone and tokenizer through `from_pretrained`, and the
sentence-transformers loader (`dualview.retrieval.encode.load_sentence_transformer`) words its
failures with `ModelLoadError`, so a folder that does not exist, one that holds no model, or a
Hub name that cannot be reached offline reads the same wherever it is named::

    model.name_or_path: cannot load model '/nope': no such folder

`load_complete` also refuses a checkpoint whose weights do not cover the model it is loaded
as (Hugging Face would initialise the missing ones at random and only warn): a saved folder
of one kind read as another is an error, not a model with a random head. `load_whole` does
the same for a loader that does not hand back the loading information
(sentence-transformers): it reads the missing weights from transformers' own load report
(`missing_weights`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub.utils import LocalEntryNotFoundError
from safetensors import SafetensorError

from dualview.errors import ConfigError
from dualview.resources import resolve_model_path

#: The config key that names the backbone of a trained model.
NAME_KEY = "model.name_or_path"
#: Missing weight names shown in an error (the rest are counted).
_SHOWN = 3
#: The logger on which transformers (4.x and 5.x) reports the weights a load initialised.
_LOAD_LOGGER = "transformers.modeling_utils"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NEWLY_INITIALIZED = re.compile(r"newly initialized: \[([^\]]*)\]")  # transformers 4.x
#: Weights a sentence embedding never reads: BERT's pooler (the Pooling module pools).
UNUSED_BY_EMBEDDINGS = ("pooler.",)

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


#: Why a Hub id did not load when it is not cached and the Hub cannot be reached.
OFFLINE_REASON = (
    "not in the local Hugging Face cache and the Hub cannot be reached (offline or "
    "HF_HUB_OFFLINE=1): pass a local folder, or load it once with network access"
)


def _offline(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a Hub look-up that found
    nothing in the cache while the Hub was unreachable."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, LocalEntryNotFoundError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def load_failure_reason(name: str, exc: BaseException) -> str:
    """One line saying why ``name`` did not load (``exc``: what the library raised)."""
    if _names_a_path(name) and not Path(name).expanduser().exists():
        return "no such folder"
    if _offline(exc):
        return OFFLINE_REASON
    lines = str(exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    return f"a weights file is damaged ({reason})" if isinstance(exc, SafetensorError) else reason


def from_pretrained(
    loader: Callable[..., T], name: str, key: str | None = NAME_KEY, **kwargs: Any
) -> T:
    """``loader(path, **kwargs)`` (``AutoModel.from_pretrained``, ``AutoTokenizer...``) for
    ``name`` (``embedded:minilm`` resolved); a failure is a `ModelLoadError` naming ``key``."""
    try:
        return loader(resolve_model_path(name), **kwargs)
    except (OSError, ValueError, SafetensorError) as exc:  # SafetensorError: a damaged file
        raise ModelLoadError(name, load_failure_reason(name, exc), key) from None


def _missing_error(name: str, missing: Sequence[str], what: str, key: str | None) -> None:
    """A `ModelLoadError` when ``missing`` (weights of ``what`` not in the folder) is not empty."""
    if not missing:
        return
    missing = sorted(missing)
    shown = ", ".join(missing[:_SHOWN]) + (", ..." if len(missing) > _SHOWN else "")
    raise ModelLoadError(
        name,
        f"weights of {what} missing from the folder, they would start at random ({shown}; "
        f"{len(missing)} in all): the folder holds another kind of model",
        key,
    )


def load_complete(
    loader: Callable[..., Any], name: str, key: str | None = NAME_KEY, **kwargs: Any
) -> Any:
    """Like `from_pretrained` for a model, but every weight of the model must come from the
    checkpoint: missing ones (a folder of another kind) are a `ModelLoadError`."""
    model, info = from_pretrained(loader, name, key, output_loading_info=True, **kwargs)
    saved_as = ", ".join(getattr(model.config, "architectures", None) or ["unknown"])
    what = f"{type(model).__name__} (the folder's weights: {saved_as})"
    _missing_error(name, list(info.get("missing_keys") or ()), what, key)
    return model


def missing_in_report(message: str) -> list[str]:
    """The weight names a transformers load report lists as missing (newly initialised):
    the MISSING rows of 5.x's table, or 4.x's ``newly initialized: [...]`` list."""
    text = _ANSI.sub("", message)
    rows = [line.split(" | ") for line in text.splitlines()]
    names = [row[0].strip() for row in rows if len(row) > 1 and row[1].strip() == "MISSING"]
    for listed in _NEWLY_INITIALIZED.findall(text):
        names += [part.strip(" '\"") for part in listed.split(",") if part.strip(" '\"")]
    return names


class _ReportRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.missing: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.missing += missing_in_report(record.getMessage())


@contextmanager
def missing_weights() -> Iterator[list[str]]:
    """The names of the weights that models loaded inside the block initialised at random,
    read from transformers' load report (recorded whatever transformers' verbosity)."""
    logger = logging.getLogger(_LOAD_LOGGER)
    recorder, level = _ReportRecorder(), logger.level
    logger.addHandler(recorder)
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield recorder.missing
    finally:
        logger.removeHandler(recorder)
        logger.setLevel(level)


def load_whole(
    loader: Callable[..., T],
    name: str,
    key: str | None = NAME_KEY,
    unused: tuple[str, ...] = (),
    **kwargs: Any,
) -> T:
    """`from_pretrained` for a loader that builds its models itself (a sentence-transformers
    model): a weight its models had to initialise at random is a `ModelLoadError`, except
    those whose names start with one of ``unused`` (weights the loaded model never reads)."""
    with missing_weights() as missing:
        model = from_pretrained(loader, name, key, **kwargs)
    _missing_error(name, [m for m in missing if not m.startswith(unused)], "the model", key)
    return model
