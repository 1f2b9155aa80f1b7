"""The error bar on a timing ratio: a 95 % confidence interval for candidate median ÷
baseline median, by a paired percentile bootstrap over the alternated rounds.

    low, high = ratio_interval(base_walls, cand_walls, seed="timing:first_backup_wall")
    METHOD                     # the sentence the timing record stores as interval_method

Round *i* of the baseline and round *i* of the candidate ran next to each other (the clients
alternate), so a resample draws round indices with replacement and keeps each pair together:
drift in the machine's load moves both medians of a resample alike, as it moved the rounds.
The generator is seeded from ``seed`` (a string, hashed by :mod:`random`), so the same rounds
give the same interval on every machine and every re-reading. With fewer than
``MIN_ROUNDS`` complete pairs there is no interval (None), never a made-up one.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

RESAMPLES = 2000
LEVEL = 0.95
#: fewer complete pairs than this give no interval (a bootstrap of 1–2 rounds is meaningless)
MIN_ROUNDS = 3

METHOD = (
    f"paired percentile bootstrap over the alternated rounds ({RESAMPLES} resamples of round "
    f"indices, baseline and candidate of a round kept together, seeded), {LEVEL:.0%} interval "
    "of candidate median ÷ baseline median"
)


def ratio_interval(
    baseline: Sequence[float | None],
    candidate: Sequence[float | None],
    *,
    seed: str,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> tuple[float, float] | None:
    """[low, high] of the median ratio, or None when fewer than ``MIN_ROUNDS`` rounds have
    both values or a resample's baseline median is not positive."""
    pairs = [
        (b, c) for b, c in zip(baseline, candidate, strict=True) if b is not None and c is not None
    ]
    if len(pairs) < MIN_ROUNDS:
        return None
    rng = random.Random(seed)
    n = len(pairs)
    ratios: list[float] = []
    for _ in range(resamples):
        picked = [pairs[rng.randrange(n)] for _ in range(n)]
        base = statistics.median(p[0] for p in picked)
        if base <= 0:
            return None
        ratios.append(statistics.median(p[1] for p in picked) / base)
    ratios.sort()
    tail = (1.0 - level) / 2.0
    low = ratios[int(tail * resamples)]
    high = ratios[min(resamples - 1, int((1.0 - tail) * resamples))]
    return round(low, 4), round(high, 4)


def half_width(interval: Sequence[float], ratio: float) -> float:
    """The interval's half-width as a fraction of the ratio (0.05 = ±5 %)."""
    low, high = interval
    return (high - low) / 2.0 / ratio
