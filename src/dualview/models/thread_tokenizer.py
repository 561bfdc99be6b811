"""One tokenizer per thread, for tokenization that runs in loader threads.

A fast (tokenizers) tokenizer keeps its truncation and padding settings as state in its Rust
backend, and every call sets them (`dualview.models.token_ids`), so two threads calling one
tokenizer with different limits can see each other's settings. `ThreadTokenizers` hands the
main thread the tokenizer itself and every other thread its own deep copy, made on first use.
"""

from __future__ import annotations

import copy
import threading
from typing import Any


class ThreadTokenizers:
    """``tokenizer`` on the main thread, a private copy of it on each other thread."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._local = threading.local()

    def get(self) -> Any:
        """The calling thread's tokenizer."""
        if threading.current_thread() is threading.main_thread():
            return self.tokenizer
        own = getattr(self._local, "tokenizer", None)
        if own is None:
            own = self._local.tokenizer = copy.deepcopy(self.tokenizer)
        return own
