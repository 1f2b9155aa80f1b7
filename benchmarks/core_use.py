#!/usr/bin/env python3
"""How busy each core is while one lab command runs (a benchmark, not a test).

Reads ``/proc/stat`` every ``--interval`` seconds while the command runs, from its start to
its exit, and prints for each run its wall, the machine's CPU time over it (every process,
``/proc/stat``'s user+nice+system+irq+softirq+steal, so the lab's children and the clients
are counted), and how much of the wall the machine spent with every core busy, with some
idle, and with all idle. A run that keeps every core busy is short of CPU: what shortens it
is less work, not more overlap or another thread. Then the median busy share per core in
each interval across the runs (the timeline of the default run's cores).

    python benchmarks/core_use.py --runs 5 --json benchmarks/core-use.json
    python benchmarks/core_use.py --runs 3 -- evaluate --local --source-dir \\
        tests/assets/candidates/alt-client

Run it on an otherwise idle machine: whatever else runs is counted as the command's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_COMMAND = ["run", "--all", "--collector", "none", "--packets", "off"]
#: a core whose busy share in an interval is at least this is "busy"
BUSY = 0.9


def read_stat() -> list[tuple[int, int]]:
    """(busy, total) jiffies of every core, in /proc/stat's order."""
    cores = []
    with open("/proc/stat", encoding="ascii") as stat:
        for line in stat:
            if line.startswith("cpu") and line[3] != " ":
                f = [int(x) for x in line.split()[1:]]
                idle = f[3] + f[4]  # idle + iowait
                total = sum(f[:8])  # guest time is already in user
                cores.append((total - idle, total))
    return cores


def sample(command: list[str], interval: float) -> dict[str, Any]:
    """Run the command once, sampling the cores until it exits."""
    samples: list[tuple[float, list[float]]] = []
    done = threading.Event()

    def sampler() -> None:
        prev = read_stat()
        while not done.is_set():
            time.sleep(interval)
            cur = read_stat()
            shares = [
                (b1 - b0) / (n1 - n0) if n1 > n0 else 0.0
                for (b0, n0), (b1, n1) in zip(prev, cur, strict=True)
            ]
            samples.append((round(time.monotonic() - start, 3), [round(s, 3) for s in shares]))
            prev = cur

    before = read_stat()
    start = time.monotonic()
    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    proc = subprocess.run(
        [sys.executable, "-m", "lab", *command],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.monotonic() - start
    done.set()
    thread.join()
    after = read_stat()
    hz = os.sysconf("SC_CLK_TCK")
    cpu = sum(b1 - b0 for (b0, _), (b1, _) in zip(before, after, strict=True)) / hz
    inside = [shares for at, shares in samples if at <= wall]
    every = sum(1 for s in inside if all(x >= BUSY for x in s))
    none = sum(1 for s in inside if all(x < 1 - BUSY for x in s))
    n = max(1, len(inside))
    return {
        "exit_status": proc.returncode,
        "wall_s": round(wall, 3),
        "machine_cpu_s": round(cpu, 3),
        "every_core_busy": round(every / n, 3),
        "all_idle": round(none / n, 3),
        "some_idle": round((n - every - none) / n, 3),
        "samples": samples,
    }


def timeline(runs: list[dict[str, Any]], interval: float) -> list[tuple[float, list[float]]]:
    """The median share per core in each interval, over the runs that reached it."""
    bins: dict[int, list[list[float]]] = {}
    for run in runs:
        for at, shares in run["samples"]:
            bins.setdefault(round(at / interval), []).append(shares)
    rows = []
    for key in sorted(bins):
        cores = list(zip(*bins[key], strict=True))
        rows.append((round(key * interval, 3), [round(statistics.median(c), 2) for c in cores]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.05, help="seconds (default 0.05)")
    parser.add_argument("--json", type=Path, help="write every run's samples here")
    parser.add_argument("command", nargs="*", help="the lab command (default: an untraced run)")
    args = parser.parse_args()
    command = args.command or DEFAULT_COMMAND
    print(f"lab {' '.join(command)}: {args.runs} run(s), /proc/stat every {args.interval} s")
    runs = []
    for index in range(args.runs):
        run = sample(command, args.interval)
        runs.append(run)
        print(
            f"  run {index + 1}: exit {run['exit_status']}, wall {run['wall_s']:.3f} s, "
            f"machine CPU {run['machine_cpu_s']:.2f} s; every core busy "
            f"{run['every_core_busy']:.0%} of the wall, some idle {run['some_idle']:.0%}, "
            f"all idle {run['all_idle']:.0%}"
        )
    walls = [r["wall_s"] for r in runs]
    print(f"wall: median {statistics.median(walls):.3f} s ({min(walls):.3f} … {max(walls):.3f})")
    rows = timeline(runs, args.interval)
    print("median busy share per core, by time from the start:")
    for at, shares in rows:
        bar = "  ".join(f"{s:4.0%}" for s in shares)
        print(f"  {at:6.2f} s  {bar}")
    if args.json:
        args.json.write_text(
            json.dumps({"command": command, "interval": args.interval, "runs": runs}, indent=1)
            + "\n"
        )
    return 0 if all(r["exit_status"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
