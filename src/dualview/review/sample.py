"""Seeded stratified sampling: ``n`` of ``N`` items with every stratum in proportion.

Allocation is proportional with largest remainders (Hamilton's method), so stratum h gets
``floor(n·N_h/N)`` items plus one for the largest fractional parts, and the sample is
self-weighting: its plain mean estimates the whole file's share. Within a stratum the items
are a seeded random choice; the same (items, n, seed) always gives the same sample, in a
seeded shuffled order so that a reviewer who stops early still holds a mixed sample.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Items per stratum: proportional to ``sizes``, summing to ``min(n, total)``."""
    total = sum(sizes.values())
    n = min(n, total)
    if n <= 0:
        return dict.fromkeys(sizes, 0)
    exact = {s: n * size / total for s, size in sizes.items()}
    counts = {s: math.floor(x) for s, x in exact.items()}
    spare = n - sum(counts.values())
    # Largest remainder first; ties broken by stratum name so the result is deterministic.
    for s in sorted(exact, key=lambda s: (counts[s] - exact[s], s))[:spare]:
        counts[s] += 1
    return counts


def stratified_sample(strata: Sequence[str], n: int, seed: int = 0) -> list[int]:
    """Indexes of a stratified sample of ``n`` items whose strata are ``strata`` (one label per
    item): seeded, proportional, in a seeded random order."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, stratum in enumerate(strata):
        members[stratum].append(index)
    counts = allocate({s: len(m) for s, m in members.items()}, n)
    chosen: list[int] = []
    for stratum in sorted(members):
        rng = random.Random(f"{seed}:{stratum}")
        chosen += rng.sample(members[stratum], counts[stratum])
    random.Random(f"{seed}:order").shuffle(chosen)
    return chosen
