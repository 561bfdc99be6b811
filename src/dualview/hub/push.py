"""``dualview push``: upload a dataset folder or a model folder to the Hugging Face Hub.

The token is read from an environment variable (``HF_TOKEN`` by default) and handed to
``huggingface_hub`` only; it is never printed, logged or written to a file, and an error that
would quote it is rewritten without it. ``HF_ENDPOINT`` (or ``endpoint=``) points the upload
at another Hub-compatible server, which is how the offline test records the HTTP calls.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualview.config import parse_yaml_mapping
from dualview.errors import ConfigError, DataError, DualviewError
from dualview.io.files import read_input_text

CARD_FILE = "README.md"

REPO_TYPES = ("dataset", "model")


@dataclass
class PushResult:
    repo_id: str
    repo_type: str
    url: str
    commit: str | None


def guess_repo_type(folder: Path) -> str:
    """``model`` for a sentence-transformers folder, ``dataset`` for a Hub dataset export."""
    if (folder / "modules.json").is_file() or (folder / "config.json").is_file():
        return "model"
    return "dataset"


def check_card(folder: Path) -> dict[str, Any]:
    """``FOLDER/README.md``'s YAML metadata; a missing, unreadable or broken card is an error.

    The card is what the Hub shows and indexes, so a damaged one is refused before anything
    is uploaded.
    """
    card = folder / CARD_FILE
    if not (card.is_symlink() or card.exists()):
        raise DualviewError(f"{folder}: no {CARD_FILE} card; export or save it with dualview first")
    text = read_input_text(card)
    if not text.strip():
        raise DataError(card, None, "card", "empty")
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 3)  # "---\n---" is an empty block
    if end < 0:
        raise DataError(card, 1, "metadata", "the YAML block opened by --- is never closed")
    return parse_yaml_mapping(text[4:end], card, first_line=2)


def read_token(token_env: str) -> str:
    token = os.environ.get(token_env, "").strip()
    if not token:
        raise ConfigError(f"no Hub token: set the environment variable {token_env}")
    return token


def push(
    folder: str | Path,
    repo_id: str,
    repo_type: str | None = None,
    token_env: str = "HF_TOKEN",
    private: bool = False,
    endpoint: str | None = None,
    message: str = "Upload with dualview",
) -> PushResult:
    """Create ``repo_id`` if needed and upload every file of ``folder`` in one commit."""
    from huggingface_hub import HfApi

    folder = Path(folder)
    check_card(folder)
    kind = repo_type or guess_repo_type(folder)
    if kind not in REPO_TYPES:
        raise ConfigError(f"repo type {kind!r}: choose from {list(REPO_TYPES)}")
    token = read_token(token_env)
    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT"), token=token)
    try:
        url = api.create_repo(repo_id, repo_type=kind, private=private, exist_ok=True)
        info = api.upload_folder(
            folder_path=str(folder), repo_id=repo_id, repo_type=kind, commit_message=message
        )
    except Exception as exc:  # huggingface_hub raises many types; keep the token out of it
        text = str(exc).replace(token, "***")
        raise DualviewError(f"push to {repo_id} failed: {text.splitlines()[0]}") from None
    commit = getattr(info, "oid", None)
    return PushResult(repo_id, kind, str(url), commit)
