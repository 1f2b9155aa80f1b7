"""A timing ratio and its error bar: the median of the rounds' own ratios (round *i*'s
candidate ÷ round *i*'s baseline) and its 95 % confidence interval, by a paired percentile
bootstrap over the alternated rounds.

    median_round_ratio(base_walls, cand_walls)     # 0.97 (None: no round with both values)
    low, high = ratio_interval(base_walls, cand_walls, seed="timing:first_backup_wall")
    low, high = above_floor_interval(base_walls, cand_walls, floor_walls, seed="…")
    METHOD                     # the sentence the timing record stores as interval_method

Round *i* of the baseline and round *i* of the candidate ran next to each other (the clients
alternate), so the ratio is taken within each round, where what the two clients shared (the
machine's load at that moment) cancels, and a resample draws round indices with replacement,
keeping each pair together. On the lab's machine this interval was narrower than the one of
candidate median ÷ baseline median on the same rounds, or as narrow where the two clients'
walls were not correlated (docs/performance.md, round 11); the share above the instrument
floor stays a ratio of medians (a round's baseline can be as fast as its floor, which leaves
that round no share to divide by).
The generator is seeded from ``seed`` (a string, hashed by :mod:`random`), so the same rounds
give the same interval on every machine and every re-reading. With fewer than
``MIN_ROUNDS`` complete pairs there is no interval (None), never a made-up one.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence

RESAMPLES = 2000
LEVEL = 0.95
#: fewer complete pairs than this give no interval (a bootstrap of 1–2 rounds is meaningless)
MIN_ROUNDS = 3

METHOD = (
    f"paired percentile bootstrap over the alternated rounds ({RESAMPLES} resamples of round "
    f"indices, baseline and candidate of a round kept together, seeded), {LEVEL:.0%} interval "
    "of the median of the rounds' candidate ÷ baseline"
)


def round_ratios(
    baseline: Sequence[float | None], candidate: Sequence[float | None]
) -> list[float] | None:
    """Each round's candidate ÷ baseline, for the rounds with both values; None when a
    baseline value is not positive (no ratio to take)."""
    pairs = [
        (b, c) for b, c in zip(baseline, candidate, strict=True) if b is not None and c is not None
    ]
    if any(b <= 0 for b, _ in pairs):
        return None
    return [c / b for b, c in pairs]


def median_round_ratio(
    baseline: Sequence[float | None], candidate: Sequence[float | None]
) -> float | None:
    """The ratio ``ratio_interval`` bounds: the median of the rounds' candidate ÷ baseline
    (None without a round that has both values, or with a baseline value not positive)."""
    ratios = round_ratios(baseline, candidate)
    return statistics.median(ratios) if ratios else None


def ratio_interval(
    baseline: Sequence[float | None],
    candidate: Sequence[float | None],
    *,
    seed: str,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> tuple[float, float] | None:
    """[low, high] of the median of the rounds' candidate ÷ baseline
    (``median_round_ratio``), or None when fewer than ``MIN_ROUNDS`` rounds have both values
    or a baseline value is not positive."""
    return paired_bootstrap([baseline, candidate], median_of_pairs, seed, resamples, level)


def above_floor_interval(
    baseline: Sequence[float | None],
    candidate: Sequence[float | None],
    floor: Sequence[float | None],
    *,
    seed: str,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> tuple[float, float] | None:
    """[low, high] of the clients' shares above the instrument floor, (candidate median −
    floor median) ÷ (baseline median − floor median), the three clients of a round kept
    together; None when a resample's baseline is not above its floor (no share to compare)."""
    return paired_bootstrap([baseline, candidate, floor], ratio_above_floor, seed, resamples, level)


def median_of_pairs(columns: Sequence[Sequence[float]]) -> float | None:
    ratios = round_ratios(columns[0], columns[1])
    return None if ratios is None else statistics.median(ratios)


def ratio_above_floor(columns: Sequence[Sequence[float]]) -> float | None:
    floor = statistics.median(columns[2])
    base = statistics.median(columns[0]) - floor
    return None if base <= 0 else (statistics.median(columns[1]) - floor) / base


def paired_bootstrap(
    columns: Sequence[Sequence[float | None]],
    statistic: Callable[[Sequence[Sequence[float]]], float | None],
    seed: str,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> tuple[float, float] | None:
    """The ``level`` percentile interval of ``statistic`` over ``resamples`` resamples of
    the rounds (the rows of ``columns``, one column a client), each round's values kept
    together; rounds missing a value are left out. None with fewer than ``MIN_ROUNDS``
    complete rounds or when ``statistic`` is undefined (None) for a resample."""
    rounds = [row for row in zip(*columns, strict=True) if all(v is not None for v in row)]
    if len(rounds) < MIN_ROUNDS:
        return None
    rng = random.Random(seed)
    n = len(rounds)
    values: list[float] = []
    for _ in range(resamples):
        picked = [rounds[rng.randrange(n)] for _ in range(n)]
        value = statistic([[float(row[i] or 0.0) for row in picked] for i in range(len(columns))])
        if value is None:
            return None
        values.append(value)
    values.sort()
    tail = (1.0 - level) / 2.0
    low = values[int(tail * resamples)]
    high = values[min(resamples - 1, int((1.0 - tail) * resamples))]
    return round(low, 4), round(high, 4)


def half_width(interval: Sequence[float], ratio: float) -> float:
    """The interval's half-width as a fraction of the ratio (0.05 = ±5 %)."""
    low, high = interval
    return (high - low) / 2.0 / ratio
