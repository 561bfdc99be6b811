"""Run several ``dualview`` command lines in one interpreter (one start-up for a test that
needs a fresh process, so that the plugin's entry points are read): reads a JSON list of
argument lists on stdin, writes one JSON line ``{"code", "stdout", "stderr"}`` per command."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout

from dualview.cli import main


def run(argv: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["dualview", *argv]
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    for argv in json.load(sys.stdin):
        print(json.dumps(run(argv)), flush=True)
