"""k-of-N intervals and pass@k / pass^k against published values (R's binom.test for
Clopper–Pearson, binom::binom.wilson for Wilson, the estimators by hand)."""

from __future__ import annotations

import pytest

from lab import intervals


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        (0, 3, (0.0, 0.7076)),  # binom.test(0, 3)$conf.int: 0.0000000 0.7075982
        (1, 3, (0.0084, 0.9057)),  # 0.008403759 0.905700575
        (2, 3, (0.0943, 0.9916)),  # 0.09429932 0.99159624
        (3, 3, (0.2924, 1.0)),  # 0.2924018 1.0000000
        (5, 10, (0.1871, 0.8129)),  # 0.187086 0.812914
        (1, 1, (0.025, 1.0)),
    ],
)
def test_clopper_pearson_matches_binom_test(k: int, n: int, expected: tuple[float, float]) -> None:
    assert intervals.clopper_pearson(k, n) == expected
    assert intervals.interval(k, n) == expected


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [(0, 3, (0.0, 0.5615)), (2, 3, (0.2077, 0.9385)), (5, 10, (0.2366, 0.7634))],
)
def test_wilson_matches_the_score_interval(k: int, n: int, expected: tuple[float, float]) -> None:
    assert intervals.wilson(k, n) == expected
    assert intervals.interval(k, n, "wilson") == expected


def test_zero_of_three_is_compatible_with_up_to_63_percent() -> None:
    """The issue's sentence: one-sided 95 %, 1 − 0.05^(1/3) = 0.6316."""
    assert intervals.upper_bound(0, 3) == pytest.approx(1 - 0.05 ** (1 / 3), abs=1e-4)
    assert intervals.percent(intervals.upper_bound(0, 3)) == "63 %"
    assert intervals.lower_bound(3, 3) == pytest.approx(0.05 ** (1 / 3), abs=1e-4)
    assert intervals.upper_bound(3, 3) == 1.0 and intervals.lower_bound(0, 3) == 0.0


@pytest.mark.parametrize(
    ("n", "c", "k", "at", "hat"),
    [
        (3, 0, 1, 0.0, 0.0),
        (3, 1, 1, 0.3333, 0.3333),
        (3, 1, 2, 0.6667, 0.0),  # 1 - C(2,2)/C(3,2) = 2/3
        (3, 2, 2, 1.0, 0.3333),  # C(2,2)/C(3,2) = 1/3
        (3, 3, 3, 1.0, 1.0),
        (10, 3, 5, 0.9167, 0.0),  # 1 - C(7,5)/C(10,5) = 1 - 21/252
        (10, 7, 3, 0.9917, 0.2917),  # 1 - C(3,3)/C(10,3); C(7,3)/C(10,3) = 35/120
    ],
)
def test_pass_at_k_and_pass_hat_k(n: int, c: int, k: int, at: float, hat: float) -> None:
    assert intervals.pass_at_k(n=n, c=c, k=k) == at
    assert intervals.pass_hat_k(n=n, c=c, k=k) == hat


@pytest.mark.parametrize(("k", "n"), [(-1, 3), (4, 3), (0, 0)])
def test_an_impossible_k_of_n_is_refused(k: int, n: int) -> None:
    with pytest.raises(ValueError):
        intervals.clopper_pearson(k, n)


def test_k_beyond_n_has_no_pass_at_k() -> None:
    with pytest.raises(ValueError):
        intervals.pass_at_k(n=3, c=1, k=4)
    with pytest.raises(ValueError):
        intervals.interval(1, 3, "normal")
