"""Exact McNemar test (`dualview.proportions.mcnemar_exact`), checked against binomial sums
done by hand and against its symmetry."""

from __future__ import annotations

import pytest

from dualview.proportions import mcnemar_exact


def test_mcnemar_exact_matches_the_binomial_tail_by_hand() -> None:
    # b=0, c=5: both tails of Binomial(5, 1/2) at the extremes, 2 * (1/32) = 0.0625.
    assert mcnemar_exact(0, 5) == pytest.approx(0.0625)
    # b=2, c=8: 2 * (1 + 10 + 45) / 1024.
    assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024)
    assert mcnemar_exact(8, 2) == mcnemar_exact(2, 8)


def test_mcnemar_exact_is_one_when_the_classifiers_agree_or_split_evenly() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0  # the doubled tail exceeds 1 and is capped


def test_mcnemar_exact_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="discordant"):
        mcnemar_exact(-1, 2)
