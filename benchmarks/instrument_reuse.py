#!/usr/bin/env python3
"""What reusing a kept instrument check saves ``lab evaluate`` (a benchmark, not a test).

Runs ``lab evaluate --local`` of a correct candidate (the alternative client) with the
timing rounds fixed (``--timing-runs N --timing-max-runs N``, so that the rounds rule's
stop, which follows the machine's noise, does not differ between the two sides), under one
``--out``, alternating pair by pair:

* **fresh**: ``--recalibrate``, the seeded ``false-success`` and ``unexpected-egress`` run
  first (and the check is kept again);
* **reused**: the default, which takes the check kept under the same key.

One unmeasured evaluation first keeps a check. Prints every run, the medians (min–max)
and the paired reused ÷ fresh ratios; ``--json`` keeps them.

    python benchmarks/instrument_reuse.py --pairs 5 --json benchmarks/instrument-reuse.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CANDIDATE = ROOT / "tests" / "assets" / "candidates" / "alt-client"


def evaluate(out: Path, rounds: int, *extra: str) -> tuple[float, bool]:
    """Wall seconds of one evaluation, and whether its instrument check was reused."""
    argv = [
        sys.executable, "-m", "lab", "evaluate", "--local", "--source-dir", str(CANDIDATE),
        "--timing-runs", str(rounds), "--timing-max-runs", str(rounds), "--out", str(out),
        "--json", *extra,
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"lab evaluate ended {done.returncode}: {done.stderr[-600:]}")
    document = json.loads(done.stdout)
    return wall, document["evaluation"]["instrument_reused_from"] is not None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=12, help="timing rounds, fixed")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {"fresh": [], "reused": []}
    with tempfile.TemporaryDirectory(prefix="lab-bench-reuse-") as tmp:
        out = Path(tmp) / "out"
        evaluate(out, args.rounds)  # keeps a check (unmeasured)
        for pair in range(1, args.pairs + 1):
            for side, extra in (("fresh", ("--recalibrate",)), ("reused", ())):
                wall, reused = evaluate(out, args.rounds, *extra)
                if reused != (side == "reused"):
                    raise SystemExit(f"pair {pair}: the {side} evaluation reused={reused}")
                walls[side].append(wall)
                print(f"pair {pair} {side:6}: {wall:6.2f} s", flush=True)
    ratios = [r / f for f, r in zip(walls["fresh"], walls["reused"], strict=True)]
    for side, values in walls.items():
        print(
            f"{side:6} median {statistics.median(values):6.2f} s "
            f"({min(values):.2f} … {max(values):.2f})"
        )
    print(
        "reused ÷ fresh, paired: median "
        f"{statistics.median(ratios):.3f} ({min(ratios):.3f} … {max(ratios):.3f})"
    )
    if args.json is not None:
        document = {
            "benchmark": "instrument_reuse",
            "rounds": args.rounds,
            "walls": walls,
            "paired_ratios": ratios,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
