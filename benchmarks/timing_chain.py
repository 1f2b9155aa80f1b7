#!/usr/bin/env python3
"""Where a timed first backup's wall goes, step by step through the jail, and which step
carries its spread (a benchmark, not a test).

Runs ``lab evaluate``'s later timing rounds (``lab.evaluate.timing_cell.sandboxed_round``:
the seeded client against itself, each round a cell of its own, warmed up with ``true``, then
the first backup) while bpftrace records the kernel's own timestamps for every process of
the jail: each ``exec`` (``sched:sched_process_exec``), each move into a cgroup
(``cgroup:cgroup_attach_task``) and bwrap's exits (``sched:sched_process_exit``). A jail is
``nsenter`` → ``bwrap`` → ``sh`` (remounts /proc, joins the invocation's cgroups) → ``capsh``
→ ``lab-filter`` → ``prlimit`` → the client, so each invocation splits into:

* ``nsenter → bwrap``: entering the cell's network namespace;
* ``bwrap's set-up``: the mount, PID, IPC and UTS namespaces and the binds;
* ``join``: ``sh``'s exec to ``capsh``'s (the /proc remount and the cgroup joins);
* ``capsh … exec``: dropping privileges, the system-call filter, the limits, up to the
  client's exec;
* ``the client``: its exec to bwrap's exit (what it does, the receiver's answers included).

For each step it prints the spread over the invocations, and for the timed ones the 95 %
interval of the median of the rounds' candidate ÷ baseline (``lab.evaluate.interval``) over
12-round windows and over all rounds, with and without the step: which step's removal would
narrow the deciding interval. bpftrace's raw output is kept (``--raw``).

    python benchmarks/timing_chain.py --rounds 48 --raw benchmarks/timing-chain-2026-12-06.txt \
        --json benchmarks/timing-chain-2026-12-06.json
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
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

from lab.evaluate import timing_cell  # noqa: E402
from lab.sandbox import Sandbox  # noqa: E402
from lab.workloads.backup import fixture  # noqa: E402

SCRIPT = r"""
tracepoint:sched:sched_process_exec {
  printf("%llu exec %d %s\n", nsecs, pid, str(args->filename));
}
tracepoint:sched:sched_process_exit /comm == "bwrap"/ {
  printf("%llu exit %d %s\n", nsecs, pid, comm);
}
tracepoint:cgroup:cgroup_attach_task {
  printf("%llu attach %d %s\n", nsecs, args->pid, str(args->dst_path));
}
"""

STEPS = ("nsenter → bwrap", "bwrap's set-up", "join", "capsh … exec", "the client", "whole")
LEAST = 12
SEED = "timing-chain"


def chains(raw: str) -> list[dict[str, Any]]:
    """Every jail in the trace, in start order: its kind (the client, or ``true``: a warm-up)
    and each step's milliseconds."""
    by_pid: dict[int, list[tuple[int, str, str]]] = collections.defaultdict(list)
    for line in raw.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and parts[0].isdigit() and parts[2].isdigit():
            by_pid[int(parts[2])].append((int(parts[0]), parts[1], parts[3]))
    found = []
    for pid, events in sorted(by_pid.items(), key=lambda item: item[1][0][0]):
        execs = [(t, what) for t, kind, what in events if kind == "exec"]
        if [Path(w).name for _, w in execs[:2]] != ["nsenter", "bwrap"]:
            continue
        end = next((t for t, kind, _ in events if kind == "exit"), None)
        inner = next(
            (
                by_pid[p]
                for p in range(pid + 1, pid + 8)
                if any(k == "exec" and w == "/bin/sh" for _, k, w in by_pid.get(p, []))
            ),
            None,
        )
        if end is None or inner is None:
            continue
        at = {Path(w).name: t for t, k, w in reversed(inner) if k == "exec"}
        last = inner[-1] if inner[-1][1] == "exec" else None
        if last is None or not {"sh", "capsh"} <= at.keys():
            continue
        marks = [execs[0][0], execs[1][0], at["sh"], at["capsh"], last[0], end]
        steps = {name: (b - a) / 1e6 for name, a, b in zip(STEPS, marks, marks[1:], strict=False)}
        steps["whole"] = (end - marks[0]) / 1e6
        found.append({"kind": "true" if Path(last[2]).name == "true" else "client", **steps})
    return found


def analyse(found: list[dict[str, Any]]) -> dict[str, Any]:
    spreads: dict[str, Any] = {}
    for kind in ("true", "client"):
        mine = [c for c in found if c["kind"] == kind]
        spreads[kind] = {
            step: {
                "median_ms": round(statistics.median(v), 2),
                "p10_ms": round(statistics.quantiles(v, n=10)[0], 2),
                "p90_ms": round(statistics.quantiles(v, n=10)[-1], 2),
                "sd_ms": round(statistics.pstdev(v), 2),
            }
            for step in STEPS
            if len(v := [c[step] for c in mine]) >= 2
        }
    timed = [c for c in found if c["kind"] == "client"]
    base, cand = timed[0::2], timed[1::2]
    n = min(len(base), len(cand))
    widths: dict[str, Any] = {}
    for label, of in (
        ("whole", lambda c: c["whole"]),
        ("whole without the join", lambda c: c["whole"] - c["join"]),
        ("from capsh (after the join)", lambda c: c["capsh … exec"] + c["the client"]),
        ("the client alone", lambda c: c["the client"]),
    ):
        b, c = [of(x) for x in base[:n]], [of(x) for x in cand[:n]]
        widths[label] = {
            "windows_of_12": timing_noise.window_half_widths(b, c, SEED, LEAST),
            "all_rounds": timing_noise.half_width_pct(b, c, SEED),
        }
    return {"rounds": n, "steps": spreads, "half_widths_pct": widths}


def show(result: dict[str, Any]) -> None:
    for kind, label in (("true", "warm-ups (true)"), ("client", "timed first backups")):
        print(f"\n{label}, ms: median (p10 … p90), sd")
        for step, s in result["steps"][kind].items():
            print(
                f"  {step:16} {s['median_ms']:6.2f} ({s['p10_ms']:.2f} … {s['p90_ms']:.2f}), "
                f"sd {s['sd_ms']:.2f}"
            )
    print(f"\nthe seeded client against itself, {result['rounds']} rounds: 95 % half-width, %")
    for label, w in result["half_widths_pct"].items():
        windows = ", ".join(f"±{x}" for x in w["windows_of_12"])
        print(f"  {label:28} windows of {LEAST}: {windows}; all: ±{w['all_rounds']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=48)
    parser.add_argument("--raw", type=Path, default=None, help="keep bpftrace's output here")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    bpftrace = shutil.which("bpftrace")
    if bpftrace is None:
        raise SystemExit("timing_chain: bpftrace is not installed (apt-get install bpftrace)")
    client = ROOT / "native" / "backup-client"
    sandbox = Sandbox.open(f"bench-timing-chain-{int(time.time())}")
    try:
        with tempfile.TemporaryDirectory(prefix="lab-bench-chain-") as tmp:
            out = Path(tmp) / "bpftrace.txt"
            with out.open("w") as sink:
                tracer = subprocess.Popen([bpftrace, "-e", SCRIPT], stdout=sink, stderr=sink)
                deadline = time.monotonic() + 30
                while "Attaching" not in out.read_text() and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(1.0)  # attached (bpftrace prints "Attaching" just before)
                source = Path(tmp) / "source.bin"
                digest = fixture.write_source(source, seed="timing", size=524_288)
                data = source.read_bytes()
                closing = timing_cell.Closing()
                try:
                    for _ in range(args.rounds):
                        for name in ("baseline", "candidate"):
                            row = timing_cell.sandboxed_round(
                                sandbox, name, client, data, digest, Path(tmp), 60.0,
                                closing, ("first_backup",),
                            )  # fmt: skip
                            if row.get("failed"):
                                raise SystemExit(f"a round failed its check: {row['failed']}")
                finally:
                    closing.settle()
                    time.sleep(0.5)
                    tracer.send_signal(signal.SIGINT)
                    tracer.wait(timeout=30)
            raw = out.read_text()
    finally:
        sandbox.close()
    if args.raw is not None:
        args.raw.write_text(raw)
    found = chains(raw)
    timed = sum(1 for c in found if c["kind"] == "client")
    if timed != 2 * args.rounds:  # the pairing below takes them in order, two a round
        raise SystemExit(
            f"timing_chain: {timed} of the {2 * args.rounds} timed jails were found whole in "
            "bpftrace's output (kept with --raw); run it again on an idle machine"
        )
    result = analyse(found)
    show(result)
    if args.json is not None:
        args.json.write_text(json.dumps({"benchmark": "timing_chain", **result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
