#!/usr/bin/env python3
"""Repeatable benchmarks of the lab itself (not a timed test).

Measures, as medians over repeated runs on this machine:

1. the lab's overhead per scenario, untraced: wall time of a scenario's untraced pass minus
   the client's own wall time in it;
2. each collector's overhead ratio: traced ÷ untraced client wall and CPU time;
3. the baseline client's throughput (first backup) at 512 KiB, 8 MiB and 64 MiB, against
   the machine's own SHA-256 speed (``openssl speed -evp sha256``) as the reference limit.

    python benchmarks/lab_benchmarks.py --repeats 5 --json benchmarks/results.json

Results and the commands to repeat them go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.evaluate import timing  # noqa: E402
from lab.host import procs  # noqa: E402
from lab.host.doctor import check  # noqa: E402
from lab.model import PROCESS_COLLECTORS  # noqa: E402
from lab.pipeline import RunRequest, execute  # noqa: E402

CLIENT = ROOT / "native" / "backup-client"
SIZES = {"512 KiB": 512 * 1024, "8 MiB": 8 * 1024 * 1024, "64 MiB": 64 * 1024 * 1024}


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 6) if values else None


def openssl_sha256_bytes_per_s() -> dict[str, Any]:
    """The machine's SHA-256 speed: openssl speed's largest block size, bytes/s."""
    out = subprocess.run(
        ["openssl", "speed", "-seconds", "2", "-evp", "sha256"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # the last line: "sha256   12345.67k  ...  987654.32k" (1000s of bytes per second)
    line = [ln for ln in out.splitlines() if ln.lower().startswith("sha256")][-1]
    values = re.findall(r"([\d.]+)k", line)
    best = float(values[-1]) * 1000.0
    return {"bytes_per_s": best, "line": line.strip()}


def scenario_overheads(repeats: int, out: Path) -> dict[str, Any]:
    """Lab overhead per scenario (untraced) and per-collector overhead ratios."""
    lab_overhead: dict[str, list[float]] = {}
    ratios: dict[str, dict[str, list[float]]] = {
        c: {"wall": [], "cpu": []} for c in PROCESS_COLLECTORS
    }
    available = check(mount=True).observers
    collector = "all"
    for _ in range(repeats):
        outcome = execute(
            RunRequest(
                everything=True,
                collector=collector,
                packets="off",
                out=out,
                client=CLIENT,
                archive=False,
            ),
            say=lambda _m: None,
        )
        for s in outcome.result.scenarios:
            by = {p.collector: p for p in s.passes}
            untraced = by.get("none")
            if untraced is None:
                continue
            client_wall = sum(i.claim.wall_s for i in untraced.invocations)
            client_cpu = sum(i.claim.cpu_s or 0.0 for i in untraced.invocations)
            lab_overhead.setdefault(s.name, []).append(untraced.wall_s - client_wall)
            for name in PROCESS_COLLECTORS:
                traced = by.get(name)
                if traced is None or client_wall <= 0:
                    continue
                wall = sum(i.claim.wall_s for i in traced.invocations)
                cpu = sum(i.claim.cpu_s or 0.0 for i in traced.invocations)
                ratios[name]["wall"].append(wall / client_wall)
                if client_cpu > 0:
                    ratios[name]["cpu"].append(cpu / client_cpu)
    return {
        "repeats": repeats,
        "lab_overhead_s": {k: median(v) for k, v in sorted(lab_overhead.items())},
        "collector_ratio": {
            name: {
                "available": available[name].available,
                "reason": available[name].reason,
                "wall": median(r["wall"]),
                "cpu": median(r["cpu"]),
            }
            for name, r in ratios.items()
        },
    }


def throughput(repeats: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
        for label, size in SIZES.items():
            result = timing.alternate(
                {"baseline": CLIENT}, rounds=repeats, size=size, workdir=Path(tmp) / label
            )
            spreads = result.clients["baseline"].spreads
            first, unchanged = spreads["first_backup_wall"], spreads["unchanged_wall"]
            wall = first.median if first else None
            rows[label] = {
                "size": size,
                "first_backup_wall_median_s": wall,
                "bytes_per_s": size / wall if wall else None,
                "unchanged_wall_median_s": unchanged.median if unchanged else None,
            }
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    subprocess.run(["make", "-s", "-C", str(ROOT / "native")], check=True)
    started = time.time()
    facts = check(mount=True).facts
    sha = openssl_sha256_bytes_per_s()
    with tempfile.TemporaryDirectory(prefix="lab-bench-runs-") as tmp:
        overhead = scenario_overheads(args.repeats, Path(tmp))
    tput = throughput(args.repeats)
    for row in tput.values():
        if row["bytes_per_s"]:
            row["fraction_of_sha256_speed"] = round(row["bytes_per_s"] / sha["bytes_per_s"], 4)
    report = {
        "machine": {
            "cpu": facts.get("cpu_model"),
            "cores": os.cpu_count(),
            "kernel": facts.get("kernel_release"),
        },
        "openssl_sha256": sha,
        "overhead": overhead,
        "throughput": tput,
        "duration_s": round(time.time() - started, 1),
    }
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    procs.stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
