"""Negative selection: 30 per record, instruction negatives first, seeded, padding counted."""

from __future__ import annotations

import pytest

from dualview.config import validate_config
from dualview.data.negatives import (
    KnownPositives,
    NegativeConfig,
    SelectionStats,
    select_negatives,
)
from dualview.data.schema import Document, Record
from dualview.errors import ConfigError


def _docs(prefix: str, n: int) -> list[Document]:
    return [Document(id=f"{prefix}{k}", text=f"text {prefix}{k}") for k in range(n)]


def _orig(n_inst: int = 5, n_hard: int = 40, **extra) -> Record:
    fields = {
        "id": "o1",
        "view": "orig",
        "query": "q",
        "instruction": "i",
        "positives": _docs("p", 1),
        "instruction_negatives": _docs("n", n_inst),
        "hard_negatives": _docs("h", n_hard),
        **extra,
    }
    return Record(**fields)


def test_thirty_negatives_instruction_negatives_first():
    out = select_negatives(_orig(), NegativeConfig(), seed=0)
    assert out is not None
    assert [d.id for d in out.instruction_negatives] == ["n0", "n1", "n2"]
    assert len(out.hard_negatives) == 27
    assert [d.id for d in out.negatives()[:3]] == ["n0", "n1", "n2"]
    assert [d.id for d in out.hard_negatives] == [f"h{k}" for k in range(27)]  # ranked order


def test_all_instruction_negatives_up_to_the_limit():
    out = select_negatives(_orig(n_inst=2), NegativeConfig(), seed=0)
    assert out is not None
    assert len(out.instruction_negatives) == 2 and len(out.hard_negatives) == 28


def test_other_views_positive_is_kept_first_among_instruction_negatives():
    """N* (the dv record's positive) stays an instruction negative of the orig record."""
    out = select_negatives(_orig(), NegativeConfig(), seed=0, known_positives=frozenset({"n4"}))
    assert out is not None
    assert [d.id for d in out.instruction_negatives] == ["n4", "n0", "n1"]


def test_known_positive_is_never_a_hard_negative_and_is_counted():
    stats = SelectionStats()
    out = select_negatives(
        _orig(), NegativeConfig(), seed=0, known_positives=frozenset({"h0", "h5"}), stats=stats
    )
    assert out is not None
    ids = {d.id for d in out.hard_negatives}
    assert not ids & {"h0", "h5"}
    assert len(ids) == 27 and stats.known_positives_removed == 2


def test_sampling_is_seeded_by_instance_so_both_views_agree():
    config = NegativeConfig(hard_negative_order="sample", instruction_negative_order="sample")
    orig = _orig()
    dv = _orig(id="d1", view="dv", parent_id="o1")
    a = select_negatives(orig, config, seed=1)
    b = select_negatives(orig, config, seed=1)
    c = select_negatives(orig, config, seed=2)
    d = select_negatives(dv, config, seed=1)
    assert a is not None and b is not None and c is not None and d is not None
    assert a == b
    assert [x.id for x in a.hard_negatives] != [x.id for x in c.hard_negatives]
    assert [x.id for x in a.hard_negatives] == [x.id for x in d.hard_negatives]
    assert [x.id for x in a.hard_negatives] != [f"h{k}" for k in range(27)]


def test_padding_keep_counts_short_records():
    stats = SelectionStats()
    out = select_negatives(_orig(n_hard=4), NegativeConfig(), seed=0, stats=stats)
    assert out is not None and len(out.negatives()) == 7
    assert (stats.short, stats.kept, stats.dropped) == (1, 1, 0)
    assert stats.negatives == {7: 1}


def test_padding_drop_drops_and_counts():
    stats = SelectionStats()
    config = NegativeConfig(padding="drop")
    assert select_negatives(_orig(n_hard=4), config, seed=0, stats=stats) is None
    assert select_negatives(_orig(), config, seed=0, stats=stats) is not None
    assert (stats.dropped, stats.kept, stats.records) == (1, 1, 2)


def test_padding_random_fills_from_pool_without_known_positives_or_own_documents():
    pool = [*_docs("pool", 40), *_docs("h", 4), *_docs("p", 1), Document(id="kp", text="known")]
    stats = SelectionStats()
    config = NegativeConfig(padding="random")
    out = select_negatives(
        _orig(n_hard=4), config, seed=0, known_positives=frozenset({"kp"}), pool=pool, stats=stats
    )
    assert out is not None
    assert len(out.negatives()) == 30
    padded = [d.id for d in out.hard_negatives[4:]]
    assert len(padded) == 23 and len(set(padded)) == 23
    assert all(i.startswith("pool") for i in padded)
    assert (stats.padded_records, stats.padded_documents, stats.short) == (1, 23, 0)


def test_random_padding_with_small_pool_stays_short_and_counts():
    stats = SelectionStats()
    out = select_negatives(
        _orig(n_hard=4), NegativeConfig(padding="random"), 0, pool=_docs("pool", 2), stats=stats
    )
    assert out is not None and len(out.negatives()) == 9
    assert (stats.padded_documents, stats.short) == (2, 1)


def test_below_min_instruction_negatives_counted_for_orig_not_plain():
    stats = SelectionStats()
    select_negatives(_orig(n_inst=0), NegativeConfig(), 0, stats=stats)
    plain = Record(id="x", view="plain", query="q", positives=_docs("p", 1))
    select_negatives(plain, NegativeConfig(), 0, stats=stats)
    assert stats.below_min_instruction_negatives == 1


def test_configurable_counts():
    config = NegativeConfig(total=5, max_instruction_negatives=1)
    out = select_negatives(_orig(), config, seed=0)
    assert out is not None
    assert len(out.instruction_negatives) == 1 and len(out.hard_negatives) == 4


def test_inconsistent_config_is_a_config_error():
    with pytest.raises(ConfigError, match="max_instruction_negatives"):
        validate_config(NegativeConfig, {"total": 2, "max_instruction_negatives": 3}, "x.yaml")


def test_known_positives_join_views_counterparts_and_same_query():
    known = KnownPositives()
    known.add("o1", ["p"], "What is X?", counterpart_id="c1")
    known.add("d1", ["nstar"], "what is  x?", parent_id="o1")
    known.add("c1", ["pc"], "something else")
    known.add("z", ["pz"], "same query text", None)
    known.add("y", ["py"], "Same query text")
    known.add("lonely", ["pl"], "unrelated")
    assert known.for_record("d1") == {"p", "nstar", "pc"}
    assert known.for_record("c1") == {"p", "nstar", "pc"}
    assert known.for_record("z") == {"pz", "py"}
    assert known.for_record("lonely") == {"pl"}
    assert known.for_record("unknown") == frozenset()
