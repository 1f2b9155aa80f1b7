#!/usr/bin/env python3
"""Where the timing ratio's noise comes from, and which ratio it spares (a benchmark, not a
test).

Runs the seeded client against itself exactly as ``lab evaluate``'s timing rounds do (every
invocation in the sandbox; baseline, candidate and the instrument floor's reference uploader
alternated round by round with ``lab.evaluate.timing_cell``'s own round, each cell closed
beside the next one's opening; after the least 12 rounds only what the deciding ratio needs,
``lab.evaluate.timing.later_rounds``), a fixed ``--rounds`` per repeat, keeps every round's raw
values, and compares two statistics of the same rounds, each with the same paired bootstrap
(``lab.evaluate.interval.paired_bootstrap``):

* the median of the rounds' own ratios (candidate_i ÷ baseline_i): the lab's ratio since
  round 11 (``lab.evaluate.interval.ratio_interval``); what a round's two clients shared (the
  machine's load at that moment) cancels within the round;
* candidate median ÷ baseline median: the lab's ratio before it.

For each it also replays ``lab evaluate``'s rounds rule on the kept rounds (at least 12,
then 4 at a time up to the 60 of the cap, until the interval is within ±5 %): where the
rounds would have stopped and the half-width there. It prints the correlation of the two
clients' walls across rounds (how much of the noise they share) and the baseline's spread.

    python benchmarks/timing_noise.py --rounds 60 --repeats 8 \
        --json benchmarks/timing-noise-paired-2026-12-05.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.evaluate import floor, interval, timing, timing_cell  # noqa: E402
from lab.evaluate.request import EvaluationRequest  # noqa: E402
from lab.model.timing import (  # noqa: E402
    CAP_FACTOR,
    DECIDING_METRICS,
    INVOCATIONS,
    TARGET_HALF_WIDTH,
)
from lab.sandbox import Sandbox  # noqa: E402
from lab.workloads.backup import fixture  # noqa: E402

METRICS = ("first_backup_wall", "first_backup_cpu")
# lab evaluate's defaults: the least rounds, the rounds added at a time, the most
LEAST, STEP = EvaluationRequest.timing_runs, timing.STEP
CAP = CAP_FACTOR * LEAST


def rounds_of(
    sandbox: Sandbox,
    clients: dict[str, Path],
    size: int,
    rounds: int,
    scratch: Path,
    later: str = "lean",
) -> list[dict[str, Any]]:
    source = scratch / "source.bin"
    digest = fixture.write_source(source, seed="timing", size=size)
    data = source.read_bytes()
    closing = timing_cell.Closing()
    rows = []
    # after the least rounds, only what the deciding ratio needs, as lab evaluate does
    # ("lean"), or every client's every invocation, as it did before ("full")
    needs = timing.later_rounds(list(clients), DECIDING_METRICS)
    if later == "full":
        needs = dict.fromkeys(clients, INVOCATIONS)
    try:
        for index in range(rounds):
            rows.append(
                {
                    name: timing_cell.sandboxed_round(  # the lab's own timing round
                        sandbox, name, client, data, digest, scratch, 60.0, closing, timed
                    )
                    if (timed := INVOCATIONS if index < LEAST else needs.get(name, ()))
                    else {}
                    for name, client in clients.items()
                }
            )
    finally:
        closing.settle()
    return rows


def _of_medians(columns: Sequence[Sequence[float]]) -> float | None:
    base = statistics.median(columns[0])
    return None if base <= 0 else statistics.median(columns[1]) / base


STATISTICS = {
    "median_of_round_ratios": interval.median_of_pairs,
    "ratio_of_medians": _of_medians,
}


def _bar(base: list[float], cand: list[float], name: str, seed: str) -> dict[str, Any]:
    value = STATISTICS[name]([base, cand])
    bar = interval.paired_bootstrap([base, cand], STATISTICS[name], seed)
    width = None if value is None or bar is None else interval.half_width(bar, value)
    return {
        "ratio": None if value is None else round(value, 4),
        "interval": None if bar is None else list(bar),
        "half_width": None if width is None else round(width, 4),
    }


def half_width_pct(base: list[float], cand: list[float], seed: str) -> float | None:
    """The 95 % half-width, in % of the ratio, of the median of the rounds' cand ÷ base (the
    lab's own interval, ``lab.evaluate.interval``), to 0.1 %; None without an interval."""
    value = interval.median_round_ratio(base, cand)
    bar = interval.ratio_interval(base, cand, seed=seed)
    return None if value is None or bar is None else round(100 * interval.half_width(bar, value), 1)


def window_half_widths(
    base: list[float], cand: list[float], seed: str, window: int = LEAST
) -> list[float | None]:
    """``half_width_pct`` over consecutive windows of ``window`` rounds (a last, shorter one
    left out): how wide the interval is at the least rounds, window after window."""
    return [
        half_width_pct(base[i : i + window], cand[i : i + window], seed)
        for i in range(0, min(len(base), len(cand)) - window + 1, window)
    ]


def replay_rule(base: list[float], cand: list[float], name: str, seed: str) -> dict[str, Any]:
    """Where lab evaluate's rounds rule would have stopped on these rounds."""
    cap = min(CAP, len(base))
    n = min(LEAST, cap)
    while True:
        found = _bar(base[:n], cand[:n], name, seed)
        width = found["half_width"]
        if (width is not None and width <= TARGET_HALF_WIDTH) or n >= cap:
            return found | {"rounds": n}
        n = min(cap, n + STEP)


def analyse(rows: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    base = [r["baseline"][metric] for r in rows]
    cand = [r["candidate"][metric] for r in rows]
    seed = f"noise:{metric}"
    return {
        "metric": metric,
        "baseline_ms": [round(v * 1000, 2) for v in base],
        "candidate_ms": [round(v * 1000, 2) for v in cand],
        "floor_ms": [round(r["floor"][metric] * 1000, 2) for r in rows if r.get("floor")],
        "correlation": round(statistics.correlation(base, cand), 3),
        "baseline_spread": round(statistics.pstdev(base) / statistics.median(base), 3),
        "all_rounds": {name: _bar(base, cand, name, seed) for name in STATISTICS},
        "rule_replayed": {name: replay_rule(base, cand, name, seed) for name in STATISTICS},
    }


def summary(results: list[dict[str, Any]], size: int) -> None:
    for later in sorted({r.get("later_rounds", "lean") for r in results}):
        walls = [
            r
            for r in results
            if r["metric"] == "first_backup_wall"
            and r["size"] == size
            and r.get("later_rounds", "lean") == later
        ]
        elapsed = statistics.median(r["elapsed_s"] for r in walls)
        print(
            f"\n{size} bytes, first backup's wall, later rounds {later}, {len(walls)} repeats "
            f"({walls[0]['rounds']} rounds in {elapsed:.1f} s at the median), the rule replayed "
            f"({LEAST} … {CAP} rounds):"
        )
        for name in STATISTICS:
            widths = [100 * (r["rule_replayed"][name]["half_width"] or float("nan")) for r in walls]
            stops = [r["rule_replayed"][name]["rounds"] for r in walls]
            holds = sum(
                1
                for r in walls
                if (bar := r["rule_replayed"][name]["interval"]) is not None
                and bar[0] <= 1 <= bar[1]
            )
            print(
                f"  {name:24} half-width median ±{statistics.median(widths):.1f} % (max "
                f"±{max(widths):.1f} %, above ±5 % in {sum(w > 5 for w in widths)}); rounds "
                f"median {statistics.median(stops):g} ({min(stops)} … {max(stops)}); "
                f"intervals holding 1.0: {holds} of {len(walls)}"
            )


def one_repeat(
    sandbox: Sandbox,
    clients: dict[str, Path],
    size: int,
    rounds: int,
    repeat: int,
    tmp: Path,
    later: str = "lean",
) -> list[dict[str, Any]]:
    """One repeat's rounds, analysed per metric (and printed)."""
    started = time.monotonic()
    rows = rounds_of(sandbox, clients, size, rounds, tmp, later)
    elapsed = round(time.monotonic() - started, 1)
    failed = sum(1 for r in rows for side in r.values() if side.get("failed"))
    found_all = []
    for metric in METRICS:
        found = analyse(rows, metric) | {
            "repeat": repeat,
            "size": size,
            "rounds": rounds,
            "elapsed_s": elapsed,
            "failed_rounds": failed,
            "later_rounds": later,
        }
        found_all.append(found)
        every, rule = found["all_rounds"], found["rule_replayed"]
        print(
            f"{size:>9} repeat {repeat} {later:4} {metric:18} corr {found['correlation']:+.2f} "
            f"spread {found['baseline_spread']:.0%}; "
            + "; ".join(
                f"{name} {every[name]['ratio']} "
                f"±{100 * (every[name]['half_width'] or float('nan')):.1f}% "
                f"(rule: {rule[name]['rounds']} rounds, "
                f"±{100 * (rule[name]['half_width'] or float('nan')):.1f}%)"
                for name in STATISTICS
            )
            + f" [{elapsed} s, {failed} failed]",
            flush=True,
        )
    return found_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=CAP)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument(
        "--size", type=int, action="append", default=None, help="bytes (repeatable; 524288)"
    )
    parser.add_argument(
        "--later",
        choices=("lean", "full", "both"),
        default="lean",
        help="what the rounds after the least 12 time: what the deciding ratio needs (lean, "
        "as lab evaluate does), everything (full, as it did before), or both, alternated "
        "repeat by repeat",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--note", default="", help="what else the machine ran (kept in --json)")
    args = parser.parse_args()
    sizes = args.size or [524_288]
    client = ROOT / "native" / "backup-client"
    sandbox = Sandbox.open(f"bench-noise-{int(time.time())}")
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="lab-bench-noise-") as tmp:
            reference = floor.build(Path(tmp) / "floor", None)
            clients = {"baseline": client, "candidate": client}
            if reference.binary is not None:
                clients["floor"] = reference.binary
            for repeat in range(1, args.repeats + 1):
                for size in sizes:  # alternated within each repeat
                    later = args.later
                    if later == "both":  # alternated repeat by repeat
                        later = "lean" if repeat % 2 else "full"
                    results += one_repeat(
                        sandbox, clients, size, args.rounds, repeat, Path(tmp), later
                    )
    finally:
        sandbox.close()
    for size in sizes:
        summary(results, size)
    if args.json is not None:
        document = {"benchmark": "timing_noise", "note": args.note, "results": results}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
