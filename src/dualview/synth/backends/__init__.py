"""LLM backends behind one interface (`dualview.synth.backends.base.ChatBackend`), one
registered kind each (`dualview.synth.backends.base.BACKENDS`)."""

from __future__ import annotations

from dualview.synth.backends.base import BACKENDS, BackendConfig, BackendKind, ChatBackend

__all__ = ["BACKENDS", "BackendConfig", "BackendKind", "build_backend"]


def build_backend(config: BackendConfig) -> ChatBackend:
    """The backend that ``config.kind`` names (its module is imported when a config names it)."""
    return BACKENDS.get(config.kind).build(config)
