#!/usr/bin/env python3
"""How fast the receiver consumes one large PUT, on its own (not a timed test).

A reference uploader (a separate Python process: connect, ``PUT digest size``, one
``sendall`` of a payload prepared in memory, read the answer) uploads the same payload over
loopback, warm-up runs first, then N measured runs. Two figures per run:

* consume: from the receiver's ``request`` record to its ``payload`` record (the request
  line parsed -> every payload byte received, written to the temporary file and hashed);
* to OK: the uploader's wall time from connect to reading ``OK`` (adds the commit: one
  fdatasync, the rename, the directory fsync).

Printed hyperfine-style (median, min, max) with the ratio to ``openssl speed -evp sha256``
at 16 KiB blocks, the machine's SHA-256 speed: a receiver that hashes every byte cannot
beat it by much, and consuming slower than it means the receiving itself is the bottleneck.

    python3 benchmarks/receiver_throughput.py --size 64M --runs 10 --warmup 2
    python3 benchmarks/receiver_throughput.py --store-dir /dev/shm/rx   # without disk sync
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab_benchmarks import openssl_sha256_bytes_per_s  # noqa: E402  (its last column: 16 KiB)

from lab.workloads.backup.receiver import Limits, Receiver  # noqa: E402

UPLOADER = r"""
import hashlib, json, socket, sys, time
host, port, size, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
payload = hashlib.shake_256(b"receiver-throughput").digest(size)
header = f"PUT {hashlib.sha256(payload).hexdigest()} {size}\n".encode()
for _ in range(runs):
    t0 = time.perf_counter()
    with socket.create_connection((host, port)) as s:
        s.sendall(header)
        s.sendall(payload)
        answer = s.recv(300)
    print(json.dumps({"to_ok_s": time.perf_counter() - t0, "answer": answer.decode()}),
          flush=True)
"""


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def measure(size: int, runs: int, warmup: int, store_dir: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rx-bench-", dir=store_dir) as tmp:
        base = Path(tmp)
        limits = Limits(max_size=max(size, Limits().max_size))
        with Receiver.serving(base / "store", base / "rx.jsonl", limits=limits) as rx:
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    UPLOADER,
                    rx.host,
                    str(rx.port),
                    str(size),
                    str(warmup + runs),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            rx.wait_idle()
            marks = {
                (r["conn"], r["event"]): r["mono_ns"]
                for r in rx.iter_records()
                if r["event"] in ("request", "payload")
            }
        uploads = [json.loads(line) for line in done.stdout.splitlines()]
    if any(u["answer"] != "OK\n" for u in uploads):
        raise SystemExit(f"an upload was not committed: {uploads}")
    conns = sorted({conn for conn, _ in marks})
    consume = [(marks[(c, "payload")] - marks[(c, "request")]) / 1e9 for c in conns]
    to_ok = [u["to_ok_s"] for u in uploads]
    return {"consume_s": consume[warmup:], "to_ok_s": to_ok[warmup:]}


def row(label: str, seconds: list[float], size: int, reference: float) -> str:
    med, lo, hi = statistics.median(seconds), min(seconds), max(seconds)
    rate = size / med
    return (
        f"  {label:<8} {med * 1e3:7.1f} ms  [min … max: {lo * 1e3:6.1f} … {hi * 1e3:6.1f} ms]"
        f"   {rate / 1e9:5.2f} GB/s   {rate / reference:5.2f} × openssl sha256"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=64 << 20)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--store-dir", type=Path, default=None, help="where the store lives")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    reference = openssl_sha256_bytes_per_s()
    result = measure(args.size, args.runs, args.warmup, args.store_dir)
    where = args.store_dir or Path(tempfile.gettempdir())
    print(
        f"Benchmark: receiver consumes a {args.size:,}-byte PUT over loopback "
        f"(store under {where}; {args.runs} runs after {args.warmup} warm-up)"
    )
    print(row("consume", result["consume_s"], args.size, reference["bytes_per_s"]))
    print(row("to OK", result["to_ok_s"], args.size, reference["bytes_per_s"]))
    print(
        f"  openssl speed -evp sha256, 16384-byte blocks: {reference['bytes_per_s'] / 1e9:.2f} GB/s"
    )
    if args.json is not None:
        document = {"size": args.size, "openssl": reference, **result}
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
