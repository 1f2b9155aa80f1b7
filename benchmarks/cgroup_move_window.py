#!/usr/bin/env python3
"""How long after one cgroup move does the next one stay cheap? (a benchmark, not a test)

A parked ``sleep`` is moved into one of two empty cgroup v2 groups after 100 ms of quiet (the
first move), then, ``--gaps`` milliseconds later, into the other (the second move); each
write to ``cgroup.procs`` is timed. Without cgroup2's ``favordynmods``, a move write-locks the
kernel's ``cgroup_threadgroup_rwsem``, whose write lock implies an RCU grace period unless
one has just passed (Linux commit 6a010a49b63a): this shows for how long after a move the
next one is spared the wait on this machine (docs/performance.md, round 15). Run as root,
with nothing else moving processes between cgroups.

    python benchmarks/cgroup_move_window.py --repeats 30 --gaps 0,5,10,15,20,30,50 \\
        --json benchmarks/cgroup-move-window-2026-12-06.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

V2 = Path("/sys/fs/cgroup/unified")


def v2_root() -> Path:
    """Where cgroup v2 is mounted here (the hybrid layout's unified mount, or the root)."""
    return V2 if (V2 / "cgroup.procs").exists() else Path("/sys/fs/cgroup")


def move(group: Path, pid: int) -> float:
    started = time.perf_counter()
    (group / "cgroup.procs").write_text(str(pid))
    return (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--gaps", default="0,5,10,15,20,30,50", help="milliseconds")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    groups = [v2_root() / f"lab-bench-move-window-{os.getpid()}-{side}" for side in "ab"]
    for group in groups:
        group.mkdir()
    parked = subprocess.Popen(["sleep", "infinity"])
    found: dict[float, list[tuple[float, float]]] = {gap: [] for gap in gaps}
    try:
        for repeat in range(args.repeats):
            for gap in gaps:
                time.sleep(0.1)  # quiet: no move for 100 ms
                first = move(groups[repeat % 2], parked.pid)
                time.sleep(gap / 1000)
                found[gap].append((first, move(groups[(repeat + 1) % 2], parked.pid)))
    finally:
        parked.kill()
        parked.wait()
        for group in groups:
            group.rmdir()
    summary = {}
    for gap, pairs in found.items():
        second = [s for _, s in pairs]
        summary[str(gap)] = {
            "first_move_median_ms": round(statistics.median(f for f, _ in pairs), 3),
            "second_move_median_ms": round(statistics.median(second), 3),
            "second_move_p90_ms": round(statistics.quantiles(second, n=10)[-1], 3),
            "second_moves_over_2_ms": sum(s > 2 for s in second),
            "repeats": len(second),
            "raw_ms": [[round(f, 3), round(s, 3)] for f, s in pairs],
        }
        row = summary[str(gap)]
        print(
            f"gap {gap:5.1f} ms: first move {row['first_move_median_ms']:.2f} ms, second move "
            f"{row['second_move_median_ms']:.2f} ms (p90 {row['second_move_p90_ms']:.2f}), over "
            f"2 ms in {row['second_moves_over_2_ms']} of {row['repeats']}"
        )
    if args.json is not None:
        document = {"benchmark": "cgroup_move_window", "gaps_ms": summary}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
