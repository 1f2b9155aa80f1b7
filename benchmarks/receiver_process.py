#!/usr/bin/env python3
"""Does the receiver's place add to a first backup's jitter? The seeded client's first backup
against a receiver on a thread of the lab's process (as the timing rounds have it) and against
one in a process of its own (a benchmark, not a test).

No sandbox: the client runs directly, so what is compared is the client's exchange with the
receiver alone. Each round starts a fresh receiver of each kind (an empty store on /dev/shm,
as the timing cells keep theirs in memory), then times the client from its spawn to its exit;
the kinds alternate within a round. For each kind it prints the wall's spread and, taking the
kind against itself (even rounds ÷ odd rounds), the 95 % half-width of the median of the
ratios (``lab.evaluate.interval``) over windows of 12 rounds: how wide a self-against-self
interval is with that receiver.

    python benchmarks/receiver_process.py --rounds 96 \
        --json benchmarks/receiver-process-2026-12-06.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import timing_noise  # noqa: E402

from lab.workloads.backup import fixture  # noqa: E402
from lab.workloads.backup.receiver import Receiver  # noqa: E402

CLIENT = ROOT / "native" / "backup-client"
#: a receiver in a process of its own: prints its address, serves until its stdin closes
SERVE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from lab.workloads.backup.receiver import Receiver
state = Path(sys.argv[1])
with Receiver.serving(state / "store", state / "rx.jsonl") as rx:
    print(rx.address, flush=True)
    sys.stdin.read()
    rx.wait_idle()
"""
WINDOW = 12


def _client(source: Path, address: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [str(CLIENT), "--source", str(source), "--receiver", address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - started


def on_a_thread(source: Path, state: Path) -> float:
    with Receiver.serving(state / "store", state / "rx.jsonl") as rx:
        wall = _client(source, rx.address)
        rx.wait_idle()
    return wall


def in_a_process(source: Path, state: Path) -> float:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    address = server.stdout.readline().strip()
    wall = _client(source, address)
    server.stdin.close()
    server.wait(timeout=30)
    return wall


KINDS: dict[str, Callable[[Path, Path], float]] = {
    "thread of the lab's process": on_a_thread,
    "process of its own": in_a_process,
}


def analyse(walls: list[float]) -> dict[str, Any]:
    found = timing_noise.window_half_widths(walls[0::2], walls[1::2], "receiver-process", WINDOW)
    widths = [w for w in found if w is not None]
    deciles = statistics.quantiles(walls, n=10)
    return {
        "walls_ms": [round(w * 1000, 3) for w in walls],
        "median_ms": round(statistics.median(walls) * 1000, 2),
        "p10_ms": round(deciles[0] * 1000, 2),
        "p90_ms": round(deciles[-1] * 1000, 2),
        "sd_ms": round(statistics.pstdev(walls) * 1000, 2),
        "half_widths_windows_of_12_pct": widths,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=96)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="lab-bench-rx-") as tmp:
        root = Path(tmp)
        source = root / "source.bin"
        fixture.write_source(source, seed="timing", size=524_288)
        for index in range(args.rounds):
            for number, (kind, run) in enumerate(KINDS.items()):
                state = root / f"{index}-{number}"
                state.mkdir()
                walls[kind].append(run(source, state))
    results = {kind: analyse(w) for kind, w in walls.items()}
    for kind, found in results.items():
        print(
            f"{kind:28} median {found['median_ms']:.2f} ms ({found['p10_ms']:.2f} … "
            f"{found['p90_ms']:.2f}), sd {found['sd_ms']:.2f} ms; against itself, windows of "
            f"{WINDOW}: " + ", ".join(f"±{w}" for w in found["half_widths_windows_of_12_pct"])
        )
    if args.json is not None:
        document = {"benchmark": "receiver_process", "rounds": args.rounds, "results": results}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
