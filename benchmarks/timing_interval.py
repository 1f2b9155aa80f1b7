#!/usr/bin/env python3
"""The error bar of ``lab evaluate``'s timing ratio on this machine (a benchmark, not a test).

Runs ``lab.evaluate.timing.alternate`` exactly as ``lab evaluate`` does (every invocation in
the sandbox, baseline / candidate / instrument floor alternated round by round), ``--repeats``
times, and prints for each repeat the medians, the ratio, its 95 % interval and the
interval's half-width as a share of the ratio; the raw timing records go to ``--json``.

    # the seeded client against itself: how wide is the error bar with the default rounds
    # rule (at least 12, at most 60, until ±5 %)?
    python benchmarks/timing_interval.py --repeats 13 --json benchmarks/timing-interval-….json
    # a fixed 20 rounds, as before the rule
    python benchmarks/timing_interval.py --rounds 20 --max-rounds 20 --repeats 3
    # a speed-up candidate at the campaign's size
    python benchmarks/timing_interval.py --candidate /tmp/cand/backup-client --size 8388608
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.evaluate import floor, timing  # noqa: E402
from lab.evaluate.interval import half_width  # noqa: E402
from lab.model.timing import CAP_FACTOR  # noqa: E402
from lab.sandbox import Sandbox  # noqa: E402


def measure(
    args: argparse.Namespace, sandbox: Sandbox | None, scratch: Path
) -> list[dict[str, Any]]:
    reference = floor.build(scratch / "floor", None)
    clients = {"baseline": ROOT / "native" / "backup-client", "candidate": args.candidate}
    if reference.binary is not None:
        clients["floor"] = reference.binary
    records = []
    for repeat in range(args.repeats):
        started = time.monotonic()
        record = timing.alternate(
            clients,
            rounds=args.rounds,
            max_rounds=args.max_rounds if args.max_rounds is not None else CAP_FACTOR * args.rounds,
            size=args.size,
            workdir=scratch / f"r{repeat}",
            timeout=60.0,
            sandbox=sandbox,
            floor=reference.describe(),
        )
        row = record.to_dict() | {"elapsed_s": round(time.monotonic() - started, 2)}
        records.append(row)
        show(repeat, record, row["elapsed_s"])
    return records


def show(repeat: int, record: timing.Timing, elapsed: float) -> None:
    metric = "first_backup_wall"
    ratio = (record.ratio or {}).get(metric)
    bar = (record.ratio_interval or {}).get(metric)
    medians = {
        name: c.spreads[metric].median * 1000 if c.spreads.get(metric) else float("nan")
        for name, c in record.clients.items()
    }
    hw = "N/A" if ratio is None or bar is None else f"±{100 * half_width(bar, ratio):.1f}%"
    stopped = record.rounds_rule.stopped if record.rounds_rule else "-"
    print(
        f"repeat {repeat + 1}: {metric} medians (ms) "
        + ", ".join(f"{n} {m:.1f}" for n, m in medians.items())
        + f"; ratio {ratio} interval {bar} half-width {hw}; {record.rounds} rounds "
        + f"(stopped: {stopped}); {elapsed:.1f} s",
        flush=True,
    )
    above = (record.ratio or {}).get(timing.ABOVE_FLOOR)
    above_bar = (record.ratio_interval or {}).get(timing.ABOVE_FLOOR)
    print(f"  above the floor: ratio {above} interval {above_bar}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidate", type=Path, default=ROOT / "native" / "backup-client")
    parser.add_argument("--rounds", type=int, default=12, help="the least rounds (lab's default)")
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=None,
        help="the most, added until the interval is within ±5 %% (default 3 × --rounds, as lab "
        "evaluate; equal to --rounds: a fixed count)",
    )
    parser.add_argument("--size", type=int, default=524_288)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="time the clients directly (no sandbox set-up in the wall): the clients' own share",
    )
    parser.add_argument(
        "--note", default="", help="what else the machine ran meanwhile (kept in --json)"
    )
    args = parser.parse_args()
    sandbox = None if args.no_sandbox else Sandbox.open(f"bench-interval-{int(time.time())}")
    if sandbox is not None:
        # one client user per pass at once, as lab evaluate's sandbox has with its default
        # --jobs (the cores): a round's cell may then close while the next one opens
        sandbox.use_slots(os.cpu_count() or 1)
    try:
        with tempfile.TemporaryDirectory(prefix="lab-bench-interval-") as tmp:
            records = measure(args, sandbox, Path(tmp))
    finally:
        if sandbox is not None:
            sandbox.close()
    if args.json is not None:
        document = {
            "benchmark": "timing_interval",
            "candidate": str(args.candidate),
            "rounds": args.rounds,
            "max_rounds": args.max_rounds
            if args.max_rounds is not None
            else CAP_FACTOR * args.rounds,
            "size": args.size,
            "sandbox": not args.no_sandbox,
            "machine_note": args.note,
            "records": records,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
