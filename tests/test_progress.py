"""Progress bars: ours follow `progress_enabled`; Hugging Face's stay out of logs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# The CLI's entry point run in a child (it flips process-wide switches), then the state of
# transformers' bars read back, as a command's later model load would see it.
CHILD = """
import sys
from dualview.cli import main
sys.argv = ["dualview", "--version"]
try:
    main()
except SystemExit:
    pass
from transformers.utils import logging
print("bars", logging.is_progress_bar_enabled())
"""


@pytest.mark.parametrize(("no_progress", "bars"), [("1", False), (None, False)])
def test_the_cli_turns_hugging_face_bars_off_outside_a_terminal(no_progress, bars) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DUALVIEW_NO_PROGRESS", "HF_HUB_DISABLE_PROGRESS_BARS")
    }
    if no_progress:
        env["DUALVIEW_NO_PROGRESS"] = no_progress
    child = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=120
    )  # stderr is a pipe, not a terminal: progress_enabled() is false either way
    assert child.returncode == 0, child.stderr[-2000:]
    assert f"bars {bars}" in child.stdout


def test_without_the_cli_transformers_keeps_its_bars() -> None:
    """The control: the child above would print True without the CLI's switch."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    code = (
        "from transformers.utils import logging; print('bars', logging.is_progress_bar_enabled())"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert "bars True" in child.stdout
