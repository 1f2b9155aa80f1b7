#!/usr/bin/env python3
"""Would another estimator of the timing ratio give a narrower 95 % interval at the least
rounds, on rounds already kept? (a benchmark, not a test: it runs no client).

Re-reads every kept ``benchmarks/timing-noise-*.json`` (the seeded client against itself,
timed as ``lab evaluate`` times it; ``machine-noise-*.json``'s lab rounds too), cuts each
repeat's rounds into consecutive windows of 12 (the least rounds), and for each window
computes the 95 % half-width (in % of the estimate) of:

* the lab's ratio: the median of the rounds' own ratios, paired percentile bootstrap
  (``lab.evaluate.interval``, its seed);
* the Hodges-Lehmann estimate of the rounds' log ratios (the median of their pairwise
  means), paired percentile bootstrap: under the paired design a round's log ratio is
  the true one plus the difference of two like noises, symmetric about 0, so it estimates
  the same ratio as the median, and is the more efficient estimator for a normal spread;
* the same Hodges-Lehmann estimate with its exact distribution-free interval (Wilcoxon
  signed-rank critical value: no resampling);
* the 25 % trimmed mean of the log ratios, paired percentile bootstrap;
* the median of the ratios with its exact order-statistic (binomial) interval: the 3rd and
  10th of 12 (96.1 %).

    python benchmarks/ratio_estimators.py > benchmarks/ratio-estimators-2026-12-06.txt
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.evaluate import interval  # noqa: E402

WINDOW = 12
RESAMPLES = interval.RESAMPLES
SEED = "timing:first_backup_wall"


def walsh_averages(x: Sequence[float]) -> list[float]:
    return sorted((x[i] + x[j]) / 2 for i in range(len(x)) for j in range(i, len(x)))


def hodges_lehmann(x: Sequence[float]) -> float:
    return statistics.median(walsh_averages(x))


def trimmed_mean(x: Sequence[float], share: float = 0.25) -> float:
    ordered = sorted(x)
    cut = int(len(ordered) * share)
    return statistics.mean(ordered[cut : len(ordered) - cut])


def bootstrap(
    x: Sequence[float], statistic: Callable[[Sequence[float]], float]
) -> tuple[float, float]:
    """The 95 % percentile interval of ``statistic`` over resamples of the rounds, seeded as
    the lab's interval is."""
    rng = random.Random(SEED)
    n = len(x)
    values = sorted(statistic([x[rng.randrange(n)] for _ in range(n)]) for _ in range(RESAMPLES))
    return values[int(0.025 * RESAMPLES)], values[min(RESAMPLES - 1, int(0.975 * RESAMPLES))]


def signed_rank_cut(n: int, alpha: float = 0.05) -> int:
    """How many Walsh averages to leave out at each end for the exact 1 - alpha interval of
    the Hodges-Lehmann estimate (the Wilcoxon signed-rank null distribution of n)."""
    most = n * (n + 1) // 2
    counts = [1] + [0] * most
    for k in range(1, n + 1):
        for total in range(most, k - 1, -1):
            counts[total] += counts[total - k]
    below = 0
    for total, count in enumerate(counts):
        below += count
        if below / 2**n > alpha / 2:
            return total
    return 0


def half_width_pct(low: float, high: float, centre: float) -> float:
    """Bounds and centre on the log scale, as the lab's half-width of a ratio: % of it."""
    return 100 * (math.exp(high) - math.exp(low)) / 2 / math.exp(centre)


def widths(base: list[float], cand: list[float]) -> dict[str, float]:
    ratio = interval.median_round_ratio(base, cand)
    bar = interval.ratio_interval(base, cand, seed=SEED)
    assert ratio is not None and bar is not None
    logs = [math.log(c / b) for b, c in zip(base, cand, strict=True)]
    hl = hodges_lehmann(logs)
    walsh = walsh_averages(logs)
    cut = signed_rank_cut(len(logs))
    ordered = sorted(logs)
    return {
        "median of round ratios, bootstrap (the lab's)": 100 * interval.half_width(bar, ratio),
        "Hodges-Lehmann, bootstrap": half_width_pct(*bootstrap(logs, hodges_lehmann), hl),
        "Hodges-Lehmann, exact signed-rank": half_width_pct(walsh[cut], walsh[-1 - cut], hl),
        "25 % trimmed mean, bootstrap": half_width_pct(
            *bootstrap(logs, trimmed_mean), trimmed_mean(logs)
        ),
        "median, exact order statistics (3rd, 10th)": half_width_pct(
            ordered[2], ordered[9], statistics.median(logs)
        ),
    }


def windows(paths: list[Path]) -> list[tuple[list[float], list[float]]]:
    found = []
    for path in paths:
        for row in json.loads(path.read_text()).get("results", []):
            if row.get("kind") == "bare":  # machine_noise's fixed work, not the lab's rounds
                continue
            base, cand = row.get("baseline_ms"), row.get("candidate_ms")
            if not base or not cand:
                continue
            for i in range(0, min(len(base), len(cand)) - WINDOW + 1, WINDOW):
                b, c = base[i : i + WINDOW], cand[i : i + WINDOW]
                if all(v is not None and v > 0 for v in b + c):
                    found.append((b, c))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="default: the kept timing noise files")
    args = parser.parse_args()
    here = ROOT / "benchmarks"
    files = args.files or sorted(
        [*here.glob("timing-noise-*.json"), *here.glob("machine-noise-*.json")]
    )
    cut = windows(files)
    table: dict[str, list[float]] = {}
    for base, cand in cut:
        for name, width in widths(base, cand).items():
            table.setdefault(name, []).append(width)
    print(f"{len(cut)} windows of {WINDOW} rounds from {len(files)} files")
    print(f"{'estimator':46} {'median':>8} {'p75':>8} {'within ±5 %':>12}")
    for name, values in table.items():
        ordered = sorted(values)
        within = sum(v <= 5.0 for v in values)
        print(
            f"{name:46} {statistics.median(values):7.1f}% {ordered[3 * len(values) // 4]:7.1f}% "
            f"{within:5d} of {len(values)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
