#!/usr/bin/env python3
"""Where an untraced ``lab run --all`` spends its wall, stage by stage, from the run's own
records (a benchmark, not a test).

Each run is started from the shell's clock (``python -m lab run --all --collector none
--packets off``) and read back afterwards; nothing in the lab is patched or timed from
inside. From the run directory:

* ``commands.jsonl``: when the first command of the first pass started;
* ``timeline.jsonl``: every client's start and exit (the lab's monotonic clock, turned into
  the shell's with the run's own ``time-base`` offset), so busy-spin's chain (its first
  client's start to its second client's exit) and the last client's exit;
* the files' modification times: ``results.json``, ``report.pdf`` and the archive;
* and the process's end, on the shell's clock.

After each run, a run of busy-spin alone gives its chain with no other pass beside it:
added to busy-spin's first client's start in the whole run, that is how early the whole
run's last pass could end if every other pass and the lab's work beside the chain cost
nothing.

Beside each run, the machine's busy time (``/proc/stat``: core-seconds not idle, over the
run's wall) says how much of its two cores the run had. Once, before the runs, ``openssl
speed -evp sha256`` gives the machine's speed in a figure earlier rounds also recorded, so
that runs on different machines of the same kind can be compared.

    python benchmarks/untraced_stages.py --runs 12 --json benchmarks/untraced-stages.json

Run it in the checkout to be measured (its ``lab`` is the one imported), on an otherwise
idle machine, after a ``make -C native``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_to_evidence import ROOT, summary

RUN = ["run", "--all", "--collector", "none", "--packets", "off"]
#: the scenario whose two invocations run one after the other and spin for 0.3 s each
CHAIN = "busy-spin"
#: the same run of that scenario alone: its chain with the machine to itself
ALONE = ["run", CHAIN, "--collector", "none", "--packets", "off"]
ALONE_STAGE = "busy-spin's chain in a run of busy-spin alone (the run's floor, with nothing beside)"

#: the stages printed, in order: (key, what it measures)
STAGES = (
    ("first_command", "process start → the first pass's first command"),
    ("chain_start", "process start → busy-spin's first client"),
    ("chain", "busy-spin's chain: its first client's start → its second client's exit"),
    ("after_chain", "busy-spin's chain's end → the last client's exit"),
    ("last_exit", "process start → the last client's exit"),
    ("results", "the last client's exit → results.json written"),
    ("reports", "results.json → report.pdf written"),
    ("archive", "report.pdf → the archive written"),
    ("exit", "the archive → the process's end"),
    ("wall", "the whole run, from the shell"),
    ("busy", "core-seconds the machine was busy during the run (of 2 × wall)"),
)


def busy_core_seconds() -> float:
    """Core-seconds this machine has not been idle since boot (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    ticks = sum(fields) - fields[3] - fields[4]  # idle and iowait
    return ticks / os.sysconf("SC_CLK_TCK")


def sha256_speed() -> str:
    """``openssl speed -evp sha256``'s 16 KiB figure: the machine's speed, one number."""
    done = subprocess.run(
        ["openssl", "speed", "-seconds", "2", "-evp", "sha256"],
        capture_output=True,
        text=True,
        check=False,
    )
    last = done.stdout.strip().splitlines()[-1:] or ["(openssl speed printed nothing)"]
    return last[0]


def one_run(out: Path, argv: list[str] = RUN, tree: Path = ROOT) -> dict[str, float]:
    """One ``lab`` run of the checkout ``tree`` under ``out`` from the shell's clock, and
    its stages."""
    before = {p.name for p in out.glob("run-*")}
    busy0, start = busy_core_seconds(), time.time()
    done = subprocess.run(
        [sys.executable, "-m", "lab", *argv, "--out", str(out)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    end, busy1 = time.time(), busy_core_seconds()
    made = [p for p in out.glob("run-*") if p.is_dir() and p.name not in before]
    if done.returncode != 0:
        # a run that missed an expectation ends 1: say which, from its own results.json
        missed = []
        if made and (made[0] / "results.json").is_file():
            missed = not_met(json.loads((made[0] / "results.json").read_text()))
        said = "; ".join(missed) or (done.stderr.strip() or done.stdout.strip())[-600:]
        raise SystemExit(f"lab {' '.join(argv)} in {tree} ended {done.returncode}: {said}")
    (run_dir,) = made
    return {**stages(run_dir, start, end), "busy": busy1 - busy0}


def not_met(results: dict[str, Any]) -> list[str]:
    """Each expectation a run's ``results.json`` says was not met, in a few words."""
    return [
        f"{s['name']}: {f['observer']} {f['key']} expected {f['expected']}, "
        f"observed {f['observed']}"
        for s in results["scenarios"]
        for f in s["findings"]
        if f.get("met") is False
    ]


def stages(run_dir: Path, start: float, end: float) -> dict[str, float]:
    """The stages of the run in ``run_dir`` (every key of ``STAGES`` but ``busy``), in
    seconds, from its records and files; ``start`` and ``end``: the process's, on the
    shell's clock (``time.time()``)."""
    commands = [json.loads(line) for line in (run_dir / "commands.jsonl").open()]
    rows = [json.loads(line) for line in (run_dir / "timeline.jsonl").open()]
    base = next(r for r in rows if r.get("event") == "time-base")
    offset_ns = base["realtime_offset"]["start"]["offset_ns"]

    def at(row: dict[str, Any]) -> float:
        return float((row["t_ns"] + offset_ns) / 1e9)

    starts = [r for r in rows if r.get("event") == "client-start"]
    exits = [r for r in rows if r.get("source") == "client" and r.get("event") == "exit"]
    chain_starts = [at(r) for r in starts if r.get("scenario") == CHAIN]
    chain_exits = [at(r) for r in exits if r.get("scenario") == CHAIN]
    if not chain_starts or len(chain_exits) != len(chain_starts):
        raise SystemExit(f"{run_dir}: the timeline has no whole {CHAIN} chain")
    last_exit = max(at(r) for r in exits)
    results = (run_dir / "results.json").stat().st_mtime
    pdf = (run_dir / "report.pdf").stat().st_mtime
    archive = run_dir.with_name(run_dir.name + ".tar.gz").stat().st_mtime
    return {
        "first_command": min(c["started_at"] for c in commands) - start,
        "chain_start": min(chain_starts) - start,
        "chain": max(chain_exits) - min(chain_starts),
        "after_chain": last_exit - max(chain_exits),
        "last_exit": last_exit - start,
        "results": results - last_exit,
        "reports": pdf - results,
        "archive": archive - pdf,
        "exit": end - archive,
        "wall": end - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=12, help="measured runs")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs first")
    parser.add_argument("--json", type=Path, help="also write every run and the medians here")
    args = parser.parse_args()
    speed = sha256_speed()
    print(f"openssl speed -evp sha256 (bytes per second, by block size):\n  {speed}")
    runs: list[dict[str, float]] = []
    alone: list[float] = []
    with tempfile.TemporaryDirectory(prefix="untraced-stages-") as scratch:
        out = Path(scratch)
        for _ in range(args.warmup):
            one_run(out)
        for number in range(1, args.runs + 1):
            got = one_run(out)
            runs.append(got)
            alone.append(one_run(out, ALONE)["chain"])
            print(
                f"run {number:2d}: wall {got['wall']:.3f} s, busy-spin's chain "
                f"{got['chain_start']:.3f} → {got['chain_start'] + got['chain']:.3f} s, "
                f"last client {got['last_exit']:.3f} s, busy {got['busy']:.2f} core-s; "
                f"busy-spin alone: its chain {alone[-1]:.3f} s",
                flush=True,
            )
    medians = {key: summary([r[key] for r in runs]) for key, _ in STAGES}
    medians["chain_alone"] = summary(alone)
    print(f"\n{'stage':<82} median   (min … max), {len(runs)} runs")
    for key, what in (*STAGES, ("chain_alone", ALONE_STAGE)):
        unit = "core-s" if key == "busy" else "s"
        got = medians[key]
        print(f"{what:<82} {got['median']:.3f} {unit} ({got['min']:.3f} … {got['max']:.3f})")
    floor = medians["chain_start"]["median"] + medians["chain_alone"]["median"]
    tail = statistics.median(r["wall"] - r["last_exit"] for r in runs)
    print(
        f"\nbusy-spin's first client at {medians['chain_start']['median']:.3f} s, plus its "
        f"chain alone ({medians['chain_alone']['median']:.3f} s): {floor:.3f} s before the "
        f"results, the reports and the archive (the whole run's tail after its last client: "
        f"{tail:.3f} s)"
    )
    if args.json is not None:
        document = {"sha256_speed": speed, "runs": runs, "chain_alone": alone, "medians": medians}
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
