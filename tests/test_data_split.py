from __future__ import annotations

import pytest

from dualview.data.formats.beir import load_beir
from dualview.errors import DualviewError
from tests.conftest import FIXTURES
from tests.helpers import run_cli


def test_split_beir_divides_queries_and_keeps_corpus(tmp_path):
    result = run_cli(
        "data", "split-beir", str(FIXTURES / "formats/beir-mini"), str(tmp_path / "a"),
        str(tmp_path / "b"), "--n", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    a, b = load_beir(tmp_path / "a"), load_beir(tmp_path / "b")
    assert set(a.qrels) == {"q1"} and set(b.qrels) == {"q2"}
    assert a.qrels["q1"] == {"c1": 1, "c3": 0}
    assert set(a.queries) == {"q1"} and set(b.queries) == {"q2"}
    assert a.corpus == b.corpus and len(a.corpus) == 3


def test_split_beir_rejects_bad_sizes(tmp_path):
    from dualview.data.split import split_beir

    with pytest.raises(DualviewError, match="between 1 and 1"):
        split_beir(FIXTURES / "formats/beir-mini", tmp_path / "a", tmp_path / "b", 2)
