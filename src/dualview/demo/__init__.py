"""The demo: the bundled experiment on embedded defaults (``dualview demo``).

Evaluation data shipped with the package, ``demo/data/eval/``: the gold set's test split
(hand-written instances never used for training), exported once in the FollowIR layout
(``followir/``) and in the paired layout (``paired/``) by `write_eval_sets`.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from dualview.config import validate_config
from dualview.pipeline.experiment import Experiment

DEMO_DIR = Path(__file__).resolve().parent
EVAL_DIR = DEMO_DIR / "data" / "eval"
FAST_OVERRIDES = {"limit": 10, "max_size": 20, "epochs": 3, "batch_size": 4}


def eval_benchmarks() -> list[str]:
    return [f"followir={EVAL_DIR / 'followir'}", f"paired={EVAL_DIR / 'paired'}"]


def demo_experiment(fast: bool = False, run_dir: Path | None = None) -> Experiment:
    """The demo experiment; ``fast`` synthesises fewer records and trains shorter."""
    data = yaml.safe_load((DEMO_DIR / "demo.yaml").read_text())
    data["evaluation"]["benchmarks"] = eval_benchmarks()
    if fast:
        data["name"] = "demo-fast"
        data["synthesis"]["limit"] = FAST_OVERRIDES["limit"]
        for mix in data["mixes"]:
            mix["max_size"] = FAST_OVERRIDES["max_size"]
        data["training"]["config"]["epochs"] = FAST_OVERRIDES["epochs"]
        data["training"]["config"]["batch_size"] = FAST_OVERRIDES["batch_size"]
    if run_dir is not None:
        data["run_dir"] = str(run_dir)
    return validate_config(Experiment, data, str(DEMO_DIR / "demo.yaml"))


def write_eval_sets(out_dir: Path = EVAL_DIR) -> dict[str, int]:
    """(Re)export the gold test split into the demo evaluation layouts."""
    from dualview.data.gold import load_gold
    from dualview.eval.export import export_followir, export_paired

    records = load_gold("test")
    return {
        "followir": export_followir(records, out_dir / "followir"),
        "paired": export_paired(records, out_dir / "paired"),
    }
