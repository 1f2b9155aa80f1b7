"""How sure a k of N is: a 95 % interval for the true rate, a one-sided upper bound, and
the pass@k / pass^k estimates of a campaign. Pure functions, no I/O, stdlib only.

    clopper_pearson(0, 3)          # (0.0, 0.7076): two-sided 95 %, exact
    upper_bound(0, 3)              # 0.6316: one-sided 95 % ("compatible with up to 63 %")
    wilson(2, 3)                   # (0.2077, 0.9385): the Wilson score interval
    pass_at_k(n=3, c=1, k=2)       # 0.6667: P(at least one of k tries succeeds)
    pass_hat_k(n=3, c=2, k=2)      # 0.3333: P(all k tries succeed)

The lab states its k-of-N intervals as :data:`METHOD` (Clopper–Pearson, the exact binomial
interval: conservative, never narrower than its confidence claims, defined at k = 0 and
k = N where the normal approximation fails). Wilson is here for whoever asks for it.

pass@k is the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models
Trained on Code"): 1 − C(n−c, k)/C(n, k), the chance that at least one of k repetitions
drawn without replacement from the n run met the task. pass^k (Yao et al. 2024, τ-bench)
is estimated as C(c, k)/C(n, k): the chance that all k drawn repetitions met it, an unbiased
estimate of p^k. Both are defined for 1 ≤ k ≤ n only.
"""

from __future__ import annotations

from math import comb
from statistics import NormalDist

METHOD = "clopper-pearson"
CONFIDENCE = 0.95
#: figures are stored rounded to this many decimals (results.json, --json)
DIGITS = 4
_STEPS = 200  # bisection steps: far below float resolution well before this


def _check(k: int, n: int) -> None:
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"k of N needs 0 <= k <= N and N >= 1, not {k} of {n}")


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _solve(target: float, k: int, n: int) -> float:
    """The p in [0, 1] where binomial_cdf(k, n, p) == target (it falls as p grows)."""
    low, high = 0.0, 1.0
    for _ in range(_STEPS):
        mid = (low + high) / 2
        if binomial_cdf(k, n, mid) > target:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return (low + high) / 2


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The two-sided exact interval: each tail holds at most (1 − confidence)/2."""
    _check(k, n)
    alpha = 1 - confidence
    low = 0.0 if k == 0 else _solve(1 - alpha / 2, k - 1, n)
    high = 1.0 if k == n else _solve(alpha / 2, k, n)
    return round(low, DIGITS), round(high, DIGITS)


def upper_bound(k: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided exact upper bound: the largest true rate under which k or fewer
    successes in n still has probability ≥ 1 − confidence (0 of 3 → 0.6316)."""
    _check(k, n)
    return 1.0 if k == n else round(_solve(1 - confidence, k, n), DIGITS)


def lower_bound(k: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided exact lower bound (3 of 3 → 0.3684)."""
    _check(k, n)
    return 0.0 if k == 0 else round(_solve(confidence, k - 1, n), DIGITS)


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval."""
    _check(k, n)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return round(max(0.0, centre - half), DIGITS), round(min(1.0, centre + half), DIGITS)


def interval(k: int, n: int, method: str = METHOD) -> tuple[float, float]:
    if method == "clopper-pearson":
        return clopper_pearson(k, n)
    if method == "wilson":
        return wilson(k, n)
    raise ValueError(f"unknown interval method {method!r}; use clopper-pearson or wilson")


def pass_at_k(*, n: int, c: int, k: int) -> float:
    """1 − C(n−c, k)/C(n, k): at least one of k (of the n run) met the task."""
    _check(c, n)
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, not k={k}, n={n}")
    return round(1 - comb(n - c, k) / comb(n, k), DIGITS)


def pass_hat_k(*, n: int, c: int, k: int) -> float:
    """C(c, k)/C(n, k): all k (of the n run) met the task."""
    _check(c, n)
    if not 1 <= k <= n:
        raise ValueError(f"pass^k needs 1 <= k <= n, not k={k}, n={n}")
    return round(comb(c, k) / comb(n, k), DIGITS)


def percent(value: float) -> str:
    """0.6316 -> "63 %" (what the sentences print)."""
    return f"{value * 100:.0f} %"
