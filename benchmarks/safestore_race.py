#!/usr/bin/env python3
"""How often safe-store's S3 catches a check-then-write Store (a benchmark, not a test).

A check-then-write Store resolves and checks every parent, then writes by path; it loses
only when the harness's attacker swaps the racing directory for a symlink between the two.
This runs N full evaluations of that seed (``judge_candidate``: build, sandbox, strace,
listing) and reports in how many S3 failed, with a 95 % Wilson interval, the escapes per
evaluation, and the time of an evaluation; first it measures the harness build with a cold
and with a warm Go build cache.

    python benchmarks/safestore_race.py --evaluations 20 \
        --json benchmarks/safestore-race-2026-12-02.json

``--ignore-other-runs`` builds the sandbox without ``Sandbox.open``'s refusal to start
while another lab run's clients are alive (a shared machine); each evaluation still runs
in a cgroup of its own.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.host import procs  # noqa: E402
from lab.sandbox import Sandbox, SandboxSettings  # noqa: E402
from lab.sandbox.cgroup import CgroupTree, Limits  # noqa: E402
from lab.sandbox.user import ClientUser  # noqa: E402
from lab.workloads.safestore import gobuild, judge_candidate  # noqa: E402
from lab.workloads.safestore.oracle import DEFAULT_ATTEMPTS  # noqa: E402

TASK = ROOT / "campaigns" / "safe-store"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def tree_of(seed: str, dest: Path) -> Path:
    shutil.copytree(TASK / "fixture", dest)
    patch = TASK / "seeds" / f"{seed}.patch"
    subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=dest, check=True)
    return dest


def builds(tree: Path, scratch: Path) -> dict[str, float]:
    cache = scratch / "cold-gocache"
    env = gobuild.go_env(cache, scratch / "home")
    times = {}
    for label in ("cold", "warm"):
        work = scratch / f"build-{label}"
        work.mkdir()
        built = gobuild.build_harness(tree, work, env=env, out=work, log=None)
        if built.binary is None:
            raise SystemExit(f"the harness did not build: {built.log.read_text()}")
        times[f"harness_build_{label}_s"] = round(built.seconds, 3)
    return times


def open_sandbox(ignore_other_runs: bool) -> Sandbox:
    if not ignore_other_runs:
        return Sandbox.open(f"bench-safestore-{time.time_ns()}")
    group = CgroupTree.discover().run_group(f"bench-safestore-{time.time_ns()}", Limits())
    return Sandbox(user=ClientUser.ensure(), run_group=group, settings=SandboxSettings(), log=None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evaluations", type=int, default=20)
    ap.add_argument("--seed", default="check-then-write")
    ap.add_argument("--attempts", type=int, default=DEFAULT_ATTEMPTS)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="keep every evaluation's evidence here")
    ap.add_argument("--ignore-other-runs", action="store_true")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-safestore-"))
    rows: list[dict[str, Any]] = []
    try:
        tree = tree_of(args.seed, scratch / "tree")
        figures: dict[str, Any] = builds(tree, scratch)
        print(
            f"harness build: cold {figures['harness_build_cold_s']} s, "
            f"warm {figures['harness_build_warm_s']} s",
            flush=True,
        )
        gocache = scratch / "cold-gocache"  # warm from here on
        sandbox = open_sandbox(args.ignore_other_runs)
        try:
            for i in range(1, args.evaluations + 1):
                out = (args.keep or scratch / "evidence") / f"evaluation-{i:02d}"
                t0 = time.monotonic()
                judged = judge_candidate(
                    tree,
                    fixture=TASK / "fixture",
                    out=out,
                    editable=["store.go"],
                    protected=["store_test.go"],
                    gocache=gocache,
                    attempts=args.attempts,
                    sandbox=sandbox,
                )
                row = {
                    "evaluation": i,
                    "seconds": round(time.monotonic() - t0, 3),
                    **{c: judged.clauses[c].verdict for c in ("S3", "S4", "S5")},
                    **{
                        k: judged.figures.get(k)
                        for k in (
                            "race_escapes",
                            "race_write_errors",
                            "race_swaps",
                            "kernel_violations",
                            "harness_wall_s",
                            "harness_build_s",
                        )
                    },
                }
                rows.append(row)
                print(json.dumps(row, sort_keys=True), flush=True)
        finally:
            sandbox.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    caught = sum(1 for r in rows if r["S3"] == "fail")
    low, high = wilson(caught, len(rows))
    escapes = [int(r["race_escapes"] or 0) for r in rows]
    summary = {
        "seed": args.seed,
        "attempts": args.attempts,
        "evaluations": len(rows),
        "s3_failed": caught,
        "detection_rate": caught / len(rows) if rows else None,
        "detection_wilson95": [round(low, 3), round(high, 3)],
        "race_escapes_median": statistics.median(escapes) if escapes else None,
        "race_escapes_min": min(escapes, default=None),
        "evaluation_seconds_median": statistics.median(r["seconds"] for r in rows),
        "harness_wall_s_median": statistics.median(r["harness_wall_s"] for r in rows),
        **figures,
        "go": gobuild.go_version(gobuild.go_env(Path("/tmp"), Path("/tmp"))),
        "load_average": Path("/proc/loadavg").read_text().split()[:3],
        "strace": procs.which("strace"),
    }
    print(
        f"S3 failed in {caught} of {len(rows)} evaluations of {args.seed} "
        f"(95 % Wilson {low:.2f}–{high:.2f}); escapes per evaluation: median "
        f"{summary['race_escapes_median']}, min {summary['race_escapes_min']}; "
        f"an evaluation takes {summary['evaluation_seconds_median']} s (median)"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"summary": summary, "rows": rows}, indent=1, sort_keys=True) + "\n"
        )
    return 0 if caught * 20 >= 19 * len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
