#!/usr/bin/env python3
"""What this machine lets a timing ratio be: the rounds rule on bare processes, beside the
lab's own rounds (a benchmark, not a test).

``lab evaluate``'s deciding interval is the 95 % paired bootstrap interval of the median of
the rounds' candidate ÷ baseline (``lab.evaluate.interval``), and its rules ask for ±5 % at
the least 12 rounds. How narrow can any timing be here? This benchmark alternates, repeat by
repeat, two ways of timing the same thing against itself:

* **bare**: ``sha256sum`` of a ``--mib`` MiB file (4 MiB: about 18 ms here, the order of the
  lab's first backup's 23-33 ms), the same command for "baseline" and "candidate",
  alternated round by round, each timed from spawn to reap; nothing of the lab runs (no
  sandbox, no receiver, no tracer);
* **lab**: the lab's own timing rounds (``benchmarks/timing_noise.py``'s ``rounds_of``: the
  seeded client against itself, every invocation in its sandbox cell, the later rounds lean).

For each repeat it takes the interval at 12 rounds and replays the rounds rule (12, then 4
at a time up to the cap, until ±5 %), with the lab's own statistic, bootstrap and seed. If
the bare command cannot reach ±5 % at 12 rounds, no design of the lab's rounds can: the
noise is the machine's.

    python benchmarks/machine_noise.py --rounds 60 --repeats 8 \\
        --json benchmarks/machine-noise-2026-12-06.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import timing_noise  # noqa: E402

from lab.sandbox import Sandbox  # noqa: E402

NAME = "median_of_round_ratios"  # the lab's statistic (timing_noise.STATISTICS)


def bare_rounds(argv: list[str], rounds: int) -> tuple[list[float], list[float]]:
    """The same command as "baseline" then "candidate", ``rounds`` times: walls (s)."""
    base: list[float] = []
    cand: list[float] = []
    for _ in range(rounds):
        for column in (base, cand):
            started = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
            column.append(time.perf_counter() - started)
    return base, cand


def lab_rounds(sandbox: Sandbox, rounds: int, scratch: Path) -> tuple[list[float], list[float]]:
    client = ROOT / "native" / "backup-client"
    rows = timing_noise.rounds_of(
        sandbox, {"baseline": client, "candidate": client}, 524_288, rounds, scratch
    )
    failed = [r for r in rows if any(side.get("failed") for side in r.values())]
    if failed:
        raise SystemExit(f"a timing round failed its check: {failed[0]}")
    metric = "first_backup_wall"
    return [r["baseline"][metric] for r in rows], [r["candidate"][metric] for r in rows]


def analyse(kind: str, base: list[float], cand: list[float], repeat: int) -> dict[str, Any]:
    seed = f"machine-noise:{kind}"
    least = timing_noise.LEAST
    deciles = statistics.quantiles(base, n=10)
    return {
        "kind": kind,
        "repeat": repeat,
        "rounds": len(base),
        "baseline_ms": [round(v * 1000, 3) for v in base],
        "candidate_ms": [round(v * 1000, 3) for v in cand],
        "baseline_median_ms": round(statistics.median(base) * 1000, 2),
        "baseline_p90_over_p10": round(deciles[-1] / deciles[0], 3),
        "at_least_rounds": timing_noise._bar(base[:least], cand[:least], NAME, seed),
        "rule_replayed": timing_noise.replay_rule(base, cand, NAME, seed),
    }


def show(found: dict[str, Any]) -> None:
    least, rule = found["at_least_rounds"], found["rule_replayed"]
    print(
        f"{found['kind']:4} repeat {found['repeat']}: wall median "
        f"{found['baseline_median_ms']:.1f} ms, p90/p10 {found['baseline_p90_over_p10']:.2f}; "
        f"{timing_noise.LEAST} rounds ±{100 * least['half_width']:.1f} %; rule: "
        f"{rule['rounds']} rounds ±{100 * rule['half_width']:.1f} % (ratio {rule['ratio']})",
        flush=True,
    )


def summary(results: list[dict[str, Any]]) -> None:
    least = timing_noise.LEAST
    for kind in ("bare", "lab"):
        mine = [r for r in results if r["kind"] == kind]
        at_least = [100 * r["at_least_rounds"]["half_width"] for r in mine]
        at_stop = [100 * r["rule_replayed"]["half_width"] for r in mine]
        stops = [r["rule_replayed"]["rounds"] for r in mine]
        print(
            f"{kind:4} {len(mine)} repeats: at {least} rounds ±{statistics.median(at_least):.1f} % "
            f"at the median ({min(at_least):.1f} … {max(at_least):.1f}), within ±5 % in "
            f"{sum(w <= 5 for w in at_least)}; the rule stopped at "
            f"{statistics.median(stops):g} rounds ({min(stops)} … {max(stops)}) with "
            f"±{statistics.median(at_stop):.1f} % ({min(at_stop):.1f} … {max(at_stop):.1f}), "
            f"within ±5 % in {sum(w <= 5 for w in at_stop)}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=timing_noise.CAP)
    parser.add_argument("--repeats", type=int, default=4, help="of each kind, alternated")
    parser.add_argument("--mib", type=int, default=4, help="the bare command's file (MiB)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sandbox = Sandbox.open(f"bench-machine-noise-{int(time.time())}")
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="lab-bench-machine-noise-") as tmp:
            data = Path(tmp) / "bare.bin"
            data.write_bytes(os.urandom(args.mib << 20))
            argv = ["sha256sum", str(data)]
            bare_rounds(argv, 2)  # its pages cached, as the lab's client's are
            for repeat in range(1, args.repeats + 1):
                for kind in ("bare", "lab"):
                    if kind == "bare":
                        base, cand = bare_rounds(argv, args.rounds)
                    else:
                        base, cand = lab_rounds(sandbox, args.rounds, Path(tmp))
                    results.append(analyse(kind, base, cand, repeat))
                    show(results[-1])
    finally:
        sandbox.close()
    summary(results)
    if args.json is not None:
        document = {
            "benchmark": "machine_noise",
            "bare_command": f"sha256sum <{args.mib} MiB of random bytes>",
            "results": results,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
