"""A timing ratio (the median of the rounds' own ratios) and its error bar: a seeded, paired
bootstrap over the alternated rounds."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

import pytest

from lab.evaluate.interval import (
    METHOD,
    MIN_ROUNDS,
    above_floor_interval,
    half_width,
    median_round_ratio,
    paired_bootstrap,
    ratio_above_floor,
    ratio_interval,
    round_ratios,
)


def _rounds(
    n: int, base: float, speedup: float, noise: float, seed: int
) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    b = [base * (1 + rng.uniform(-noise, noise)) for _ in range(n)]
    c = [base * speedup * (1 + rng.uniform(-noise, noise)) for _ in range(n)]
    return b, c


def test_the_interval_holds_the_ratio_and_is_the_same_on_every_reading() -> None:
    base, cand = _rounds(20, 0.040, 0.8, 0.05, seed=1)
    bar = ratio_interval(base, cand, seed="timing:first_backup_wall")
    assert bar is not None
    low, high = bar
    assert low < 0.8 < high and high - low < 0.15
    assert ratio_interval(base, cand, seed="timing:first_backup_wall") == bar
    # the seed picks the resamples (a median of 20 ratios takes few values, so two seeds
    # can land on the same bounds; five do not all)
    assert len({ratio_interval(base, cand, seed=f"another {i}") for i in range(5)}) > 1
    assert "paired percentile bootstrap" in METHOD and "95%" in METHOD


def test_noisier_rounds_give_a_wider_interval() -> None:
    quiet = ratio_interval(*_rounds(20, 0.04, 1.0, 0.02, seed=2), seed="s")
    noisy = ratio_interval(*_rounds(20, 0.04, 1.0, 0.30, seed=2), seed="s")
    assert quiet is not None and noisy is not None
    assert half_width(noisy, 1.0) > 3 * half_width(quiet, 1.0)


def test_rounds_stay_paired() -> None:
    # a load drift that moves both clients of a round alike: the pairs' ratio is exactly 0.5
    base = [0.01 * (1 + i) for i in range(20)]
    cand = [b * 0.5 for b in base]
    assert ratio_interval(base, cand, seed="s") == (0.5, 0.5)


def test_the_ratio_is_the_median_of_the_rounds_own_ratios() -> None:
    base = [0.020, 0.030, 0.020, None, 0.040]
    cand = [0.010, 0.030, 0.030, 0.050, None]
    # rounds with both values: 0.5, 1.0, 1.5; a round missing either value is no pair
    assert round_ratios(base, cand) == [0.5, 1.0, 1.5]
    assert median_round_ratio(base, cand) == 1.0
    # the median of the clients' medians would be 0.030 / 0.025 = 1.2: not what is stored
    assert median_round_ratio([0.02], [0.01]) == 0.5  # one round: a ratio, no interval
    assert median_round_ratio([None], [0.01]) is None
    assert median_round_ratio([0.0, 0.02], [0.01, 0.01]) is None  # no ratio to a zero


def _of_medians(columns: Sequence[Sequence[float]]) -> float | None:
    return statistics.median(columns[1]) / statistics.median(columns[0])


def test_a_load_both_clients_of_a_round_share_cancels_within_the_round() -> None:
    # each round's load (up to +60 %) hits both clients alike, on top of their own ±3 %
    rng = random.Random(7)
    load = [1.0 + rng.uniform(0.0, 0.6) for _ in range(24)]
    base = [0.020 * f * (1 + rng.uniform(-0.03, 0.03)) for f in load]
    cand = [0.020 * f * (1 + rng.uniform(-0.03, 0.03)) for f in load]
    paired = ratio_interval(base, cand, seed="s")
    of_medians = paired_bootstrap([base, cand], _of_medians, "s")
    assert paired is not None and of_medians is not None
    ratio = median_round_ratio(base, cand)
    assert ratio is not None and paired[0] <= ratio <= paired[1]
    # the rounds' own ratios see ±3 %; the clients' medians see the load as well
    assert half_width(paired, ratio) < 0.5 * half_width(of_medians, ratio)
    assert half_width(paired, ratio) < 0.03


def test_too_few_rounds_or_a_zero_baseline_give_no_interval() -> None:
    few = [0.01] * (MIN_ROUNDS - 1)
    assert ratio_interval(few, few, seed="s") is None
    # a round missing either value does not count as a pair
    assert ratio_interval([0.01, None, 0.01, 0.01], [0.01, 0.01, None, 0.01], seed="s") is None
    assert ratio_interval([0.0] * 5, [0.01] * 5, seed="s") is None


def test_the_share_above_the_floor_takes_the_floor_out_of_both_clients() -> None:
    # the floor is 40 ms of every round; the baseline adds 10 ms of its own, the candidate 5
    floor = [0.040 + 0.001 * (i % 3) for i in range(20)]
    base = [f + 0.010 for f in floor]
    cand = [f + 0.005 for f in floor]
    assert ratio_above_floor([base, cand, floor]) == pytest.approx(0.5)
    bar = above_floor_interval(base, cand, floor, seed="s")
    assert bar is not None and bar[0] <= 0.5 <= bar[1]
    # a baseline no slower than the floor leaves no share to compare: no interval at all
    assert above_floor_interval(floor, cand, floor, seed="s") is None
