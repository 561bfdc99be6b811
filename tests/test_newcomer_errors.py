"""What a newcomer trips over (issue 34): a missing optional extra or a Hub name that cannot be
fetched offline is one line saying what to install or pass (exit 2, no traceback), and
``verify`` groups a record with its dual view whatever the order of the input file."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

from dualview.config import validate_config
from dualview.data.pairing import ExtraDvError
from dualview.errors import DualviewError
from dualview.io.atomic import write_jsonl
from dualview.models.decoder import _peft
from dualview.models.pretrained import OFFLINE_REASON
from dualview.resources import EXTRAS, MissingExtra, optional_import
from dualview.retrieval.search import topk
from dualview.synth.estimate import TokenCounter
from dualview.synth.jobs import estimate_job, load_job
from dualview.synth.verify import group_units
from dualview.train.config import TrainConfig
from dualview.train.trainer import Trainer
from tests.helpers import doc, make_record, run_cli
from tests.tiny_lm import FIXTURE

ROOT = Path(__file__).parents[1]
BEIR = Path(__file__).parent / "fixtures" / "formats" / "beir-mini"


# -- item 6: optional extras ------------------------------------------------------------------


def _one_error(result) -> str:  # type: ignore[no-untyped-def]
    """The single ``error:`` line of a CLI run that must stop with exit 2 and no traceback."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _cli_without(module: str, *argv: str):  # type: ignore[no-untyped-def]
    """``dualview ARGV`` in a fresh interpreter where ``import MODULE`` fails as if absent."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; sys.argv = ['dualview', *sys.argv[1:]]; "
        "from dualview.cli import main; main()"
    )
    import subprocess

    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=600
    )


def test_every_extra_named_for_a_package_exists_in_pyproject() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS.values()) <= set(extras)


@pytest.mark.parametrize("module", ["starlette", "uvicorn"])
def test_review_without_the_review_extra_is_one_line(module: str, tmp_path: Path) -> None:
    records = tmp_path / "dv.jsonl"
    write_jsonl(records, [make_record("o1"), make_record("d1", "dv", parent_id="o1")])
    error = _one_error(_cli_without(module, "review", str(records)))
    assert (
        error == "error: dualview review needs the 'review' extra: pip install 'dualview[review]'"
    )
    assert not (tmp_path / "dv.jsonl.review.jsonl").exists()


def test_optional_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(MissingExtra) as caught:
        topk(np.ones((1, 2), np.float32), np.ones((1, 2), np.float32), 1, backend="faiss")
    assert str(caught.value) == (
        "backend 'faiss' needs the 'faiss' extra: pip install 'dualview[faiss]'"
    )
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(MissingExtra, match=r"^model.lora needs the 'lora' extra: pip install"):
        _peft()


def test_a_broken_optional_package_says_so_and_how_to_reinstall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Installed but failing on import (a dependency of its own missing): still one line."""

    class _Broken:
        def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
            if name == "ray":
                raise ModuleNotFoundError("No module named 'pyarrow_dep'", name="pyarrow_dep")
            return None

    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Broken(), *sys.meta_path])
    with pytest.raises(MissingExtra) as caught:
        optional_import("ray", "engine ray")
    message = str(caught.value)
    assert message.startswith("engine ray needs the 'ray' extra (ray is installed but does not")
    assert "pyarrow_dep" in message and message.endswith("pip install 'dualview[ray]'")
    assert isinstance(caught.value, DualviewError) and "\n" not in message


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb"])
def test_training_with_a_tracker_that_is_not_installed_stops_before_it_starts(
    tracker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """accelerate only warns and tracks nothing; the run must say what to install."""
    monkeypatch.setitem(sys.modules, tracker, None)
    data = {"model": {"kind": "bi_encoder"}, "loss": {"objective": "infonce"},
            "data": {"train_file": str(FIXTURE)}, "output_dir": str(tmp_path / "run"),
            "tracking": tracker}  # fmt: skip
    with pytest.raises(MissingExtra) as caught:
        Trainer(validate_config(TrainConfig, data, "train.yaml"))
    assert str(caught.value) == (
        f"tracking: {tracker} needs the 'tracking' extra: pip install 'dualview[tracking]'"
    )
    assert not (tmp_path / "run").exists()


# -- item 6: Hub names offline ----------------------------------------------------------------


def test_data_stats_with_a_hub_tokenizer_offline_is_one_line(tmp_path: Path) -> None:
    """The README's ``data stats --from beir ... --tokenizer bert-base-uncased``, offline
    with an empty Hugging Face cache: what to pass, not a 100-line traceback."""
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = run_cli(
        "data", "stats", "--from", "beir", str(BEIR), "--tokenizer", "bert-base-uncased", env=env
    )
    error = _one_error(result)
    assert error == (f"error: --tokenizer: cannot load model 'bert-base-uncased': {OFFLINE_REASON}")


def test_data_stats_counts_tokens_with_a_local_tokenizer() -> None:
    result = run_cli("data", "stats", "--from", "beir", str(BEIR), "--tokenizer",
                     "embedded:minilm", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert '"records"' in result.stdout


# -- item 7: verify units whatever the order --------------------------------------------------


def _pair(n: int) -> tuple:
    """An orig and its dual view as ``reverse`` writes it (the original kept in meta)."""
    pos, neg = doc(f"passage {n} for the original", f"p{n}"), doc(f"passage {n} flipped", f"n{n}")
    orig = make_record(f"o{n}", positives=[pos], instruction_negatives=[neg])
    meta = {"orig_instruction": orig.instruction, "orig_positive_id": pos.id}
    dv = make_record(f"o{n}-dv", "dv", parent_id=f"o{n}", instruction=f"reversed {n}",
                     positives=[neg], instruction_negatives=[pos], meta=meta)  # fmt: skip
    return orig, dv


ORDERS = {
    "interleaved": lambda o1, d1, o2, d2: [o1, d1, o2, d2],
    "origs then dvs": lambda o1, d1, o2, d2: [o1, o2, d1, d2],
    "dvs first": lambda o1, d1, o2, d2: [d2, d1, o1, o2],
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_verify_units_and_estimate_do_not_depend_on_the_order(order: str, tmp_path: Path) -> None:
    records = ORDERS[order](*_pair(1), *_pair(2))
    units = [[r.id for r in unit] for unit in group_units(records)]
    assert sorted(units) == [["o1", "o1-dv"], ["o2", "o2-dv"]]
    path = tmp_path / "units.jsonl"
    write_jsonl(path, records)
    estimate = estimate_job("verify", load_job("verify", None, []), path,
                            counter=TokenCounter.approximate())  # fmt: skip
    # each unit: the orig's scenario and the dv's, one LLM call each
    assert (estimate.units, estimate.calls) == (2, 4)


def test_a_lone_dual_view_is_still_its_own_unit() -> None:
    _, dv = _pair(1)
    orig2, dv2 = _pair(2)
    units = [[r.id for r in unit] for unit in group_units([dv, orig2, dv2])]
    assert units == [["o1-dv"], ["o2", "o2-dv"]]


def test_a_second_dv_of_an_orig_is_an_error_wherever_it_stands() -> None:
    o1, d1 = _pair(1)
    o2, d2 = _pair(2)
    again = d1.model_copy(update={"id": "o1-dv-again"})
    with pytest.raises(ExtraDvError, match=r"'o1-dv' and id 'o1-dv-again'"):
        list(group_units([o1, o2, d1, d2, again]))


def test_infir_tuples_group_by_their_parent_in_any_order() -> None:
    base = make_record("b1")
    ineg = make_record("b1-ineg", "dv", parent_id="b1")
    qneg = make_record("b1-qneg", meta={"infir_parent": "b1"})
    other = make_record("c1")
    units = [[r.id for r in unit] for unit in group_units([qneg, other, ineg, base])]
    assert units == [["c1"], ["b1", "b1-qneg", "b1-ineg"]]
