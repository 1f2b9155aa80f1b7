"""The error bar on a timing ratio: a seeded, paired bootstrap over the alternated rounds."""

from __future__ import annotations

import random

import pytest

from lab.evaluate.interval import (
    METHOD,
    MIN_ROUNDS,
    above_floor_interval,
    half_width,
    ratio_above_floor,
    ratio_interval,
    ratio_of_medians,
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
    assert ratio_interval(base, cand, seed="another") != bar
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
    assert ratio_of_medians([base, cand, floor]) == pytest.approx(0.9, abs=0.01)
    assert ratio_above_floor([base, cand, floor]) == pytest.approx(0.5)
    bar = above_floor_interval(base, cand, floor, seed="s")
    assert bar is not None and bar[0] <= 0.5 <= bar[1]
    # a baseline no slower than the floor leaves no share to compare: no interval at all
    assert above_floor_interval(floor, cand, floor, seed="s") is None
