"""``dualview train``: config errors are one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _train(*args: str) -> subprocess.CompletedProcess:
    cli = [sys.executable, "-c", "from dualview.cli import main; main()", "train", *args]
    return subprocess.run(cli, capture_output=True, text=True, check=False)


def test_unknown_key_and_missing_file_are_one_line_errors(tmp_path: Path) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(f"data: {{train_file: {tmp_path / 'none.jsonl'}}}\noutput_dir: out\n")
    typo = _train(str(config), "--set", "optim.learning_rate=1")
    assert typo.returncode == 2
    assert "optim.learning_rate: unknown key" in typo.stderr
    assert "Traceback" not in typo.stderr
    missing = _train(str(config))
    assert missing.returncode == 2
    assert "none.jsonl: file: does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
