#!/usr/bin/env python3
"""Where the timing ratio's noise comes from (a benchmark, not a test).

Runs the seeded client against itself exactly as ``lab evaluate``'s timing rounds do (every
invocation in the sandbox, baseline and candidate alternated round by round, via
``lab.evaluate.timing``'s own round), keeps every round's raw values, and compares two
paired statistics on the same rounds:

* the lab's: candidate median ÷ baseline median, with its paired bootstrap interval
  (``lab.evaluate.interval.ratio_interval``);
* the median of the per-round ratios (candidate_i ÷ baseline_i), with a percentile bootstrap
  over the rounds: it cancels what a round's two clients share (the machine's load at that
  moment), which a ratio of two medians does not.

It also prints the correlation of the two clients' walls across rounds (how much of the
noise the two clients share) and each client's own spread.

    python benchmarks/timing_noise.py --rounds 20 --size 524288 \
        --json benchmarks/timing-noise-2026-12-02.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.evaluate import interval, timing_cell  # noqa: E402
from lab.sandbox import Sandbox  # noqa: E402
from lab.workloads.backup import fixture  # noqa: E402

METRICS = ("first_backup_wall", "first_backup_cpu")


def rounds_of(sandbox: Sandbox, size: int, rounds: int, scratch: Path) -> list[dict[str, Any]]:
    client = ROOT / "native" / "backup-client"
    source = scratch / "source.bin"
    digest = fixture.write_source(source, seed="timing", size=size)
    data = source.read_bytes()
    rows = []
    for _ in range(rounds):
        row = {}
        for name in ("baseline", "candidate"):
            row[name] = timing_cell.sandboxed_round(  # the lab's own timing round
                sandbox, name, client, data, digest, scratch, 60.0
            )
        rows.append(row)
    return rows


def median_ratio_interval(ratios: list[float], seed: str) -> tuple[float, float]:
    rng = random.Random(seed)
    n = len(ratios)
    values = sorted(
        statistics.median(ratios[rng.randrange(n)] for _ in range(n))
        for _ in range(interval.RESAMPLES)
    )
    return values[int(0.025 * len(values))], values[int(0.975 * len(values))]


def analyse(rows: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    base = [r["baseline"][metric] for r in rows]
    cand = [r["candidate"][metric] for r in rows]
    ratio = statistics.median(cand) / statistics.median(base)
    bar = interval.ratio_interval(base, cand, seed=f"noise:{metric}")
    per_round = [c / b for b, c in zip(base, cand, strict=True)]
    per_ratio = statistics.median(per_round)
    per_bar = median_ratio_interval(per_round, f"noise:{metric}:per-round")
    return {
        "metric": metric,
        "baseline_ms": [round(v * 1000, 2) for v in base],
        "candidate_ms": [round(v * 1000, 2) for v in cand],
        "correlation": round(statistics.correlation(base, cand), 3),
        "baseline_spread": round(statistics.pstdev(base) / statistics.median(base), 3),
        "ratio_of_medians": round(ratio, 4),
        "ratio_of_medians_interval": bar,
        "ratio_of_medians_half_width": None if bar is None else interval.half_width(bar, ratio),
        "median_of_round_ratios": round(per_ratio, 4),
        "median_of_round_ratios_interval": [round(v, 4) for v in per_bar],
        "median_of_round_ratios_half_width": interval.half_width(per_bar, per_ratio),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--size", type=int, action="append", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = args.size or [524_288]
    sandbox = Sandbox.open(f"bench-noise-{int(time.time())}")
    results = []
    try:
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix="lab-bench-noise-") as tmp:
                started = time.monotonic()
                rows = rounds_of(sandbox, size, args.rounds, Path(tmp))
                elapsed = round(time.monotonic() - started, 1)
            failed = sum(1 for r in rows for side in r.values() if side.get("failed"))
            for metric in METRICS:
                found = analyse(rows, metric) | {"size": size, "rounds": args.rounds}
                found |= {"elapsed_s": elapsed, "failed_invocations": failed}
                results.append(found)
                hw = found["ratio_of_medians_half_width"]
                print(
                    f"{size:>9} {metric:18} corr {found['correlation']:+.2f} "
                    f"spread {found['baseline_spread']:.0%}  ratio of medians "
                    f"{found['ratio_of_medians']} ±{100 * (hw or float('nan')):.1f}%  "
                    f"median of round ratios {found['median_of_round_ratios']} "
                    f"±{100 * found['median_of_round_ratios_half_width']:.1f}%  "
                    f"({elapsed} s, {failed} failed)",
                    flush=True,
                )
    finally:
        sandbox.close()
    if args.json is not None:
        args.json.write_text(
            json.dumps({"benchmark": "timing_noise", "results": results}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
