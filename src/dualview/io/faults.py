"""Fault-injection points: deterministic, seeded kills for the crash-safety tests."""

from __future__ import annotations

import os
import signal
from typing import Any


def fault_point(label: str) -> None:
    """Deterministic crash injection for kill tests; free when the variables are unset.

    Every writer calls this after each record and before each rename. With
    ``DUALVIEW_FAULT_KILL_AT=N`` the process SIGKILLs itself at its N-th call (a seeded,
    reproducible kill point); with ``DUALVIEW_FAULT_LOG=FILE`` each call appends
    ``SCOPE<TAB>label`` to FILE (to count a run's points). With ``DUALVIEW_FAULT_SCOPE=NAME``
    only calls inside that scope count (a pipeline stage's name, see `fault_scope`).
    """
    kill_at = os.environ.get("DUALVIEW_FAULT_KILL_AT")
    log = os.environ.get("DUALVIEW_FAULT_LOG")
    if not kill_at and not log:
        return
    scope = os.environ.get("DUALVIEW_FAULT_SCOPE")
    if scope is not None and scope != _fault_state["scope"]:
        return
    _fault_state["calls"] += 1
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{_fault_state['scope']}\t{label}\n".encode())
        os.close(fd)
    if kill_at and _fault_state["calls"] == int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)


_fault_state: dict[str, Any] = {"calls": 0, "scope": ""}


def fault_scope(name: str) -> None:
    """Name the work that follows (a pipeline stage) for `fault_point`."""
    _fault_state["scope"] = name
