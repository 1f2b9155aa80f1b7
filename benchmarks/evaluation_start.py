#!/usr/bin/env python3
"""How long ``lab evaluate`` takes to reach its first pass, two commits side by side (a
benchmark, not a test).

Each revision is checked out into a git worktree (``time_to_evidence.checkout``: client
built, modules byte-compiled) with an ``--out`` of its own, where one unmeasured evaluation
first keeps an instrument check. Then pairs alternate base and head: ``lab evaluate --local``
of the correct candidate (the alternative client), its timing rounds fixed at ``--rounds``
(the rounds rule's stop follows the machine's noise, and this measures the start). From
each run's ``commands.jsonl``:

* **build → first pass**: from the end of the candidate's build to the start of the first
  command of its first pass (the check's key, the kept check's lookup, the plan's set-up);
* **start → first pass**: from the process's start (the shell's clock) to the same point;
* the whole wall.

Prints every run, the medians (min–max) and the paired head ÷ base ratios; ``--json``
keeps them.

    python benchmarks/evaluation_start.py --base HEAD~1 --head HEAD --pairs 5 \
        --json benchmarks/evaluation-start.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_to_evidence import ROOT, checkout, remove_checkout, resolve, summary

CANDIDATE = ROOT / "tests" / "assets" / "candidates" / "alt-client"
#: the first command of a pass: its network namespace
FIRST_PASS = "network namespace for one pass"
BUILD = "build the candidate client"


def lab_evaluate(tree: Path, out: Path, rounds: int) -> str:
    """``lab evaluate`` of the correct candidate in ``tree`` under ``out``; its --json."""
    argv = [
        sys.executable, "-m", "lab", "evaluate", "--local", "--source-dir", str(CANDIDATE),
        "--timing-runs", str(rounds), "--timing-max-runs", str(rounds), "--out", str(out),
        "--json",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"lab evaluate in {tree} ended {done.returncode}: {done.stderr[-600:]}")
    return done.stdout


def evaluate(tree: Path, out: Path, rounds: int) -> dict[str, float]:
    """One evaluation in ``tree``: its wall, and its start as its commands.jsonl has it."""
    epoch = time.time()
    started = time.perf_counter()
    document = json.loads(lab_evaluate(tree, out, rounds))
    wall = time.perf_counter() - started
    if document["evaluation"]["instrument_reused_from"] is None:
        raise SystemExit(f"the evaluation in {tree} did not reuse its kept instrument check")
    run_dir = Path(document["run_dir"])
    rows = [json.loads(line) for line in (run_dir / "commands.jsonl").read_text().splitlines()]
    build = next(r for r in rows if r["purpose"] == BUILD)
    first = min(r["started_at"] for r in rows if r["purpose"] == FIRST_PASS)
    return {
        "wall_s": round(wall, 3),
        "build_to_first_pass_s": round(first - (build["started_at"] + build["duration_s"]), 3),
        "start_to_first_pass_s": round(first - epoch, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="HEAD~1")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=4, help="timing rounds, fixed")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sides = {"base": resolve(args.base), "head": resolve(args.head)}
    runs: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
    with tempfile.TemporaryDirectory(prefix="lab-bench-start-") as tmp:
        trees = {name: checkout(rev, Path(tmp) / name) for name, rev in sides.items()}
        try:
            for name, tree in trees.items():
                lab_evaluate(tree, Path(tmp) / f"out-{name}", args.rounds)  # keeps a check
            for pair in range(1, args.pairs + 1):
                for name, tree in trees.items():
                    run = evaluate(tree, Path(tmp) / f"out-{name}", args.rounds)
                    runs[name].append(run)
                    print(f"pair {pair} {name} {sides[name]}: {run}", flush=True)
        finally:
            for tree in trees.values():
                remove_checkout(tree)
    table: dict[str, Any] = {"base": sides["base"], "head": sides["head"], "pairs": args.pairs,
                             "timing_rounds": args.rounds, "runs": runs}  # fmt: skip
    print(f"\nbase {sides['base']}, head {sides['head']}, {args.pairs} pairs")
    for measure in ("build_to_first_pass_s", "start_to_first_pass_s", "wall_s"):
        base = [r[measure] for r in runs["base"]]
        head = [r[measure] for r in runs["head"]]
        ratios = [h / b for h, b in zip(head, base, strict=True) if b > 0]
        row = {"base": summary(base), "head": summary(head), "paired_head_to_base": summary(ratios)}
        table[measure] = row
        print(f"{measure:24} base {row['base']}  head {row['head']}  "
              f"head/base {row['paired_head_to_base']}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(table, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
