#!/usr/bin/env python3
"""How long one safe-store evaluation takes with the defaults (a benchmark, not a test):
``python -m lab evaluate --task campaigns/safe-store/task.yaml --tree <fixture + correct.patch>
--local``, wall and CPU time, before and after a change, paired.

"before" and "after" run clean exports (``git archive``) of ``--before REF`` and
``--after REF`` (default HEAD: commit first; the worktree may change while this runs).
The runs alternate (before, after, before, after, ...) so that the load of a
shared machine falls on both alike; each pair's ratio (after / before) is kept beside the
medians. "after" first runs once unmeasured-for-the-medians (``prime``: it judges the
seeds and keeps its calibration under its --out), then every "after" run reuses it, as a
user's second evaluation of a task would.

    python benchmarks/safestore_eval_time.py --pairs 3 --before 4cebbaa \\
        --json benchmarks/safestore-eval-time-2026-12-02.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TASK = "campaigns/safe-store/task.yaml"


def candidate(dest: Path) -> Path:
    shutil.copytree(ROOT / "campaigns" / "safe-store" / "fixture", dest)
    patch = ROOT / "campaigns" / "safe-store" / "seeds" / "correct.patch"
    subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=dest, check=True)
    return dest


def export(ref: str, dest: Path) -> Path:
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def one(label: str, checkout: Path, tree: Path, out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "lab", "evaluate", "--task", TASK, "--tree", str(tree)]
    argv += ["--local", "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {
        "label": label,
        "exit_status": done.returncode,
        "wall_s": round(wall, 2),
        "user_s": round(after.ru_utime - before.ru_utime, 2),
        "system_s": round(after.ru_stime - before.ru_stime, 2),
        "loadavg_1m_at_start": load,
        "calibration_reused": "reused from" in done.stdout,
        "stdout": done.stdout,
        "stderr": done.stderr[-4000:],
    }
    print(
        f"{label}: {row['wall_s']} s wall, {row['user_s']} s user, exit {done.returncode}, "
        f"reused {row['calibration_reused']}, load {load:.1f}",
        flush=True,
    )
    return row


def median(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--before", default="4cebbaa", help="the git ref of 'before'")
    parser.add_argument("--after", default="HEAD", help="the git ref of 'after'")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    after_commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.after], capture_output=True, text=True
    ).stdout.strip()  # resolved now: HEAD may move while this runs
    with tempfile.TemporaryDirectory(prefix="lab-bench-eval-") as tmp:
        work = Path(tmp)
        tree = candidate(work / "candidate")
        old = export(args.before, work / "before")
        new = export(args.after, work / "after")
        rows = [one("prime", new, tree, work / "out-after")]
        for index in range(args.pairs):
            rows.append(one("before", old, tree, work / f"out-before-{index}"))
            rows.append(one("after", new, tree, work / "out-after"))
    befores = [r for r in rows if r["label"] == "before"]
    afters = [r for r in rows if r["label"] == "after"]
    ratios = [round(a["wall_s"] / b["wall_s"], 3) for b, a in zip(befores, afters, strict=True)]
    summary = {
        "command": f"python -m lab evaluate --task {TASK} --tree <fixture+correct.patch> --local",
        "before": args.before,
        "after": after_commit,
        "machine": f"{os.cpu_count()} CPUs, shared with other engineers' runs",
        "median_wall_s": {"before": median(befores, "wall_s"), "after": median(afters, "wall_s")},
        "median_user_s": {"before": median(befores, "user_s"), "after": median(afters, "user_s")},
        "ratios_after_over_before_wall": ratios,
        "median_ratio_wall": round(statistics.median(ratios), 3),
        "all_exit_0": all(r["exit_status"] == 0 for r in rows),
        "every_after_reused": all(r["calibration_reused"] for r in afters),
    }
    args.json.write_text(json.dumps({"summary": summary, "runs": rows}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0 if summary["all_exit_0"] and summary["every_after_reused"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
