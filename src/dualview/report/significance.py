"""Paired significance of per-query metric differences: randomization test, bootstrap CI, Holm.

Two configurations evaluated on the same queries give, per query ``q``, the difference
``d_q = m_arm(q) - m_control(q)`` of a metric (over several runs, e.g. seeds, each side's
value for ``q`` is first averaged over its runs: *seeds pooled by query*, so a query counts
once however many seeds ran). Only queries both sides scored are paired.

- **Paired randomization test** (sign flip): under H0 the label "arm" / "control" of each
  query is exchangeable, so each ``d_q`` is equally likely to be ``+d_q`` or ``-d_q``. The
  statistic is ``mean(d)``; its null distribution is that of ``mean(s * d)`` over random
  signs ``s in {-1, +1}^n`` (all ``2^n`` of them when that is at most ``n_resamples``). The
  two-sided p-value is ``min(1, 2 * min(P(T <= t_obs), P(T >= t_obs)))``, with ``+1`` added
  to numerator and denominator when the signs are sampled (scipy's ``permutation_test``
  with ``permutation_type="samples"`` computes the same numbers).
- **Bootstrap CI**: queries resampled with replacement ``n_resamples`` times; the
  percentile interval of the resampled means at ``confidence`` (scipy's ``bootstrap`` with
  ``method="percentile"``).
- **Holm** step-down correction of a family of p-values: sorted ascending,
  ``p_(i) * (m - i + 1)``, made monotone, capped at 1.

Everything is seeded, so a report is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 10_000
ALPHA = 0.05
_CHUNK = 2_000  # resamples per vectorized block (bounded memory for many queries)


@dataclass
class PairedComparison:
    """One metric, one arm against one control."""

    metric: str
    arm: str
    control: str
    n_queries: int
    mean_arm: float
    mean_control: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float | None = None

    @property
    def significant(self) -> bool:
        """p < 0.05, after Holm correction when one was applied."""
        p = self.p_holm if self.p_holm is not None else self.p_value
        return p < ALPHA

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "significant": self.significant}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedComparison:
        """The comparison `to_dict` wrote (``significant`` is recomputed, not read)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def pooled_by_query(values: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Per query id, the mean of its values over runs (seeds); NaNs dropped."""
    out = {}
    for qid, vals in values.items():
        kept = [float(v) for v in vals if not math.isnan(float(v))]
        if kept:
            out[qid] = sum(kept) / len(kept)
    return out


def paired_differences(
    arm: Mapping[str, Sequence[float]], control: Mapping[str, Sequence[float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Seed-pooled values of the queries both sides have, in sorted query-id order:
    ``(arm_values, control_values)``."""
    a, c = pooled_by_query(arm), pooled_by_query(control)
    common = sorted(set(a) & set(c))
    return np.array([a[q] for q in common]), np.array([c[q] for q in common])


def _all_signs(n: int) -> np.ndarray:
    """Every sign vector in {-1, +1}^n, shape (2^n, n)."""
    codes = np.arange(2**n, dtype=np.int64)[:, None]
    bits = (codes >> np.arange(n, dtype=np.int64)) & 1
    return 1.0 - 2.0 * bits


def randomization_p_value(
    diffs: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> float:
    """Two-sided p-value of ``mean(diffs) != 0`` by sign flipping (module docstring)."""
    d = np.asarray(diffs, dtype=float)
    n = d.size
    if n == 0:
        return float("nan")
    observed = d.mean()
    # Relative tolerance so that float noise does not split ties (as scipy does).
    tol = max(abs(observed), 1.0) * 1e-12
    exact = n < 63 and 2**n <= n_resamples
    less = greater = 0
    if exact:
        stats = _all_signs(n) @ d / n
        total, adjust = stats.size, 0
        less = int((stats <= observed + tol).sum())
        greater = int((stats >= observed - tol).sum())
    else:
        rng = np.random.default_rng(seed)
        total, adjust = n_resamples, 1
        for start in range(0, n_resamples, _CHUNK):
            size = min(_CHUNK, n_resamples - start)
            signs = rng.choice(np.array([-1.0, 1.0]), size=(size, n))
            stats = signs @ d / n
            less += int((stats <= observed + tol).sum())
            greater += int((stats >= observed - tol).sum())
    p_less = (less + adjust) / (total + adjust)
    p_greater = (greater + adjust) / (total + adjust)
    return float(min(1.0, 2.0 * min(p_less, p_greater)))


def bootstrap_ci(
    diffs: Sequence[float],
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(diffs)`` (queries resampled with replacement)."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        idx = rng.integers(0, d.size, size=(size, d.size))
        means.append(d[idx].mean(axis=1))
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(np.concatenate(means), [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order (NaNs stay NaN and do not count)."""
    indexed = [(p, i) for i, p in enumerate(p_values) if not math.isnan(p)]
    indexed.sort()
    m = len(indexed)
    adjusted = [float("nan")] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, p * (m - rank)))
        adjusted[i] = running
    return adjusted


def compare(
    metric: str,
    arm: str,
    control: str,
    arm_values: Mapping[str, Sequence[float]],
    control_values: Mapping[str, Sequence[float]],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PairedComparison | None:
    """The paired comparison of two configurations on one metric (per-query values by query
    id, a list per query over runs); ``None`` when they share no query."""
    a, c = paired_differences(arm_values, control_values)
    if a.size == 0:
        return None
    diffs = a - c
    low, high = bootstrap_ci(diffs, n_resamples=n_resamples, seed=seed)
    return PairedComparison(
        metric=metric,
        arm=arm,
        control=control,
        n_queries=int(a.size),
        mean_arm=float(a.mean()),
        mean_control=float(c.mean()),
        diff=float(diffs.mean()),
        ci_low=low,
        ci_high=high,
        p_value=randomization_p_value(diffs, n_resamples=n_resamples, seed=seed),
    )


def apply_holm(comparisons: list[PairedComparison]) -> None:
    """Holm correction within each metric over its comparisons (a family per metric), when
    a metric has more than one comparison."""
    by_metric: dict[str, list[PairedComparison]] = {}
    for comp in comparisons:
        by_metric.setdefault(comp.metric, []).append(comp)
    for family in by_metric.values():
        if len(family) < 2:
            continue
        for comp, p in zip(family, holm([c.p_value for c in family]), strict=True):
            comp.p_holm = p
