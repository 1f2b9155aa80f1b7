#!/usr/bin/env python3
"""What each step of the sandbox's per-invocation chain costs (a benchmark, not a test).

The chain ``lab.sandbox.jail`` builds is nsenter → bwrap → sh (the join shell) → capsh →
prlimit → client. This times ``/bin/true`` at the end of ever longer prefixes of it, the
variants alternated round by round (so load drift lands on all alike), plus creating and
removing a network namespace and a cgroup, the per-pass set-up. Medians with min … max.
Needs root (bwrap as root, ip netns, the cgroup v2 tree).

    sudo python benchmarks/sandbox_steps.py --rounds 30 --json benchmarks/sandbox-steps.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

NETNS = f"lab-bench-steps-{os.getpid()}"
CGROUP_ROOT = Path("/sys/fs/cgroup/unified")


def chains(true: str) -> dict[str, list[str]]:
    prlimit = [shutil.which("prlimit") or "prlimit", "--core=0", "--", true]
    capsh = [
        shutil.which("capsh") or "capsh",
        "--drop=all",
        "--gid=65534",
        "--groups=",
        "--uid=65534",
        "--inh=",
        "--noamb",
        "--no-new-privs",
        f"--shell={prlimit[0]}",
        "--",
        *prlimit[1:],
    ]
    join = ["/bin/sh", "-c", 'exec "$@"', "sh", *capsh]
    bwrap = [
        shutil.which("bwrap") or "bwrap",
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session", "--",
        *join,
    ]  # fmt: skip
    nsenter = [shutil.which("nsenter") or "nsenter", f"--net=/run/netns/{NETNS}", "--", *bwrap]
    return {
        "true": [true],
        "+ prlimit": prlimit,
        "+ capsh": capsh,
        "+ join shell": join,
        "+ bwrap": bwrap,
        "+ nsenter (whole chain)": nsenter,
    }


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def per_pass(index: int) -> dict[str, float]:
    """One network namespace and one cgroup created and removed."""
    name = f"{NETNS}-{index}"
    started = time.perf_counter()
    subprocess.run(["ip", "netns", "add", name], check=True)
    made = time.perf_counter()
    subprocess.run(["ip", "netns", "del", name], check=True)
    removed = time.perf_counter()
    group = CGROUP_ROOT / name
    group.mkdir()
    grouped = time.perf_counter()
    group.rmdir()
    done = time.perf_counter()
    return {
        "netns add": made - started,
        "netns del": removed - made,
        "cgroup mkdir": grouped - removed,
        "cgroup rmdir": done - grouped,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--note", default="", help="what else the machine ran meanwhile (kept in --json)"
    )
    args = parser.parse_args()
    subprocess.run(["ip", "netns", "add", NETNS], check=True)
    samples: dict[str, list[float]] = {}
    try:
        variants = chains(shutil.which("true") or "/bin/true")
        for index in range(args.rounds):
            for name, argv in variants.items():
                samples.setdefault(name, []).append(timed(argv))
            for name, value in per_pass(index).items():
                samples.setdefault(name, []).append(value)
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], check=False)
    table = {
        name: {
            "median_ms": round(1000 * statistics.median(v), 2),
            "min_ms": round(1000 * min(v), 2),
            "max_ms": round(1000 * max(v), 2),
            "n": len(v),
        }
        for name, v in samples.items()
    }
    for name, row in table.items():
        print(f"{name:28} {row['median_ms']:8.2f} ms  ({row['min_ms']:.2f} … {row['max_ms']:.2f})")
    if args.json is not None:
        document = {
            "benchmark": "sandbox_steps",
            "rounds": args.rounds,
            "machine_note": args.note,
            "steps": table,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
