"""Confidence intervals of proportions, for every layer that reports one (review verdicts,
the synthesis benchmark's judge accuracy)."""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n.

    centre = (p + z²/2n) / (1 + z²/n),  half = z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n);
    unlike the normal interval it stays inside [0, 1] and is sound for small n or p near 0/1.
    """
    if n <= 0:
        raise ValueError("the Wilson interval needs n >= 1")
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value for two classifiers judged on the same items:
    ``only_first`` items right by the first alone, ``only_second`` by the second alone.
    Under the null each discordant item is a fair coin, so with n = b + c and k = min(b, c),
    p = min(1, 2 · Σ_{i≤k} C(n, i) / 2ⁿ); p = 1 when no item is discordant."""
    if only_first < 0 or only_second < 0:
        raise ValueError("discordant counts must be >= 0")
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_first, only_second) + 1))
    return min(1.0, 2 * tail / 2**n)
