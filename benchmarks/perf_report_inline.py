#!/usr/bin/env python3
"""What ``perf report``'s inline frames cost, and what the lab's addr2line server saves of it
(a benchmark, not a test).

Reads every ``perf.data`` of one run directory (``--run-dir``; without it, a fresh ``lab run
--all --collector perf`` is made in a temporary directory) and reports each of them, as the
lab's perf collector does (``--children --stdio --sort symbol,dso`` with the pass's copy of
the kernel's table, here one copy of ``/proc/kallsyms``), three ways, alternated repeat by
repeat:

* ``binutils``: perf starts ``addr2line`` for each shared object of each report (the lab
  before ``lab.collectors.addr2line``);
* ``server``: the lab's server answers (``lab.collectors.addr2line.serving``), its own start
  included in each repeat;
* ``no-inline``: ``perf report --no-inline``, the floor (it loses the inlined rows, so the
  lab does not use it).

The run's boxes are gone by then, so no report resolves the client's own binary: in a run,
that object gets an addr2line of its own each report either way (it lives in the pass's
box), so what this measures is the part that changes. For each way and repeat: the wall of
all the reports, and their CPU with every process they
and the server started (``RUSAGE_CHILDREN``). Medians over ``--repeats``; then whether the
``server`` reports are byte for byte the ``binutils`` ones (perf's closing tip, drawn at
random, left out).

    python benchmarks/perf_report_inline.py --repeats 5 \
        --json benchmarks/perf-report-inline-2026-12-06.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.collectors import addr2line  # noqa: E402
from lab.collectors.perf import REPORT_OPTIONS  # noqa: E402
from lab.host.procs import CommandLog  # noqa: E402

WAYS = ("binutils", "server", "no-inline")
TIP = re.compile(rb"(?m)^# \(Tip: .*\n")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report_all(files: list[Path], kallsyms: Path, way: str) -> tuple[float, float, list[bytes]]:
    """Every file reported one way: wall, CPU (with what the server started), the outputs."""
    base = {**os.environ, "PAGER": "cat", "PERF_PAGER": "cat", "TERM": "dumb"}
    extra = ["--no-inline"] if way == "no-inline" else []
    cpu0, t0 = children_cpu(), time.perf_counter()
    outputs = []
    log = CommandLog(Path(tempfile.mkdtemp(prefix="lab-bench-log-")) / "commands.jsonl")
    with addr2line.serving(log, wanted=way == "server"):
        env = {**base, **addr2line.env(log)}
        if way == "server":  # the relay would run binutils until the server listens
            socket_path = Path(env["LAB_A2L_SOCKET"])
            while not socket_path.exists():
                time.sleep(0.005)
        for data in files:
            done = subprocess.run(
                ["perf", "report", *extra, "-i", str(data), f"--kallsyms={kallsyms}",
                 *REPORT_OPTIONS],
                capture_output=True,
                env=env,
                check=True,
            )  # fmt: skip
            outputs.append(TIP.sub(b"", done.stdout))
    return time.perf_counter() - t0, children_cpu() - cpu0, outputs


def fresh_run(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "lab", "run", "--all", "--collector", "perf", "--out", str(into)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return next(p for p in into.iterdir() if p.is_dir())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", type=Path, help="a run directory holding perf.data files")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lab-bench-inline-") as scratch:
        run_dir = args.run_dir or fresh_run(Path(scratch) / "run")
        files = sorted(run_dir.rglob("perf.data"))
        if not files:
            ap.error(f"{run_dir}: no perf.data under it; give a run made with perf passes")
        kallsyms = Path(scratch) / "kallsyms"
        kallsyms.write_bytes(Path("/proc/kallsyms").read_bytes())
        samples: dict[str, dict[str, list[float]]] = {w: {"wall": [], "cpu": []} for w in WAYS}
        same: list[bool] = []
        for repeat in range(1, args.repeats + 1):
            outputs: dict[str, list[bytes]] = {}
            for way in WAYS if repeat % 2 else reversed(WAYS):
                wall, cpu, outputs[way] = report_all(files, kallsyms, way)
                samples[way]["wall"].append(wall)
                samples[way]["cpu"].append(cpu)
                print(f"repeat {repeat} {way:9s} wall {wall:6.2f} s  cpu {cpu:6.2f} s", flush=True)
            same.append(outputs["server"] == outputs["binutils"])
    table: dict[str, Any] = {
        "run_dir": str(args.run_dir) if args.run_dir else "a fresh lab run --all --collector perf",
        "reports": len(files),
        "repeats": args.repeats,
        "server_identical_to_binutils": f"{sum(same)} of {len(same)} repeats",
        "ways": {},
    }
    print(f"\n{len(files)} perf reports a repeat, {args.repeats} repeats, medians")
    binutils_cpu = statistics.median(samples["binutils"]["cpu"])
    for way in WAYS:
        wall = statistics.median(samples[way]["wall"])
        cpu = statistics.median(samples[way]["cpu"])
        per = 1000 * cpu / len(files)
        table["ways"][way] = {
            "wall_s": samples[way]["wall"],
            "cpu_s": samples[way]["cpu"],
            "median_wall_s": round(wall, 3),
            "median_cpu_s": round(cpu, 3),
            "cpu_ms_per_report": round(per, 1),
            "cpu_vs_binutils": round(cpu / binutils_cpu, 3),
        }
        print(
            f"{way:9s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  ({per:5.1f} ms a report, "
            f"{cpu / binutils_cpu:.3f} of binutils')"
        )
    print(f"server reports identical to binutils': {table['server_identical_to_binutils']}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2) + "\n")
    return 0 if all(same) else 1


if __name__ == "__main__":
    sys.exit(main())
