"""What the sandbox's system-call filter costs (issue 21), as root: paired runs of
``bwrap … /bin/true`` without and with the filter step (``lab-filter``, which builds and
loads the filter then execs; one more exec per invocation), and the per-call cost of the
loaded filter on a tight loop of a cheap system call (``getppid`` via ``python3 -c``, a
million calls, without and with the filter). Prints medians and every sample.

    PYTHONPATH=. python benchmarks/syscall_filter.py 40
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from lab.sandbox import seccomp

FILTER = str(seccomp.helper())
BASE = [
    "bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
    "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64", "--dev", "/dev", "--proc", "/proc",
    "--ro-bind", FILTER, seccomp.INSIDE,
    "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session", "--clearenv", "--",
]  # fmt: skip
WITHOUT = [*BASE, "/bin/true"]
WITH = [*BASE, seccomp.INSIDE, "/bin/true"]
LOOP = "import os\nfor _ in range(1_000_000): os.getppid()"


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True)
    return time.monotonic() - t0


def main(rounds: int) -> None:
    samples: dict[str, list[float]] = {k: [] for k in ("without", "with", "loop", "loop+filter")}
    python = "/usr/bin/python3"
    for i in range(rounds):
        pairs = [("without", WITHOUT), ("with", WITH)]
        for name, argv in pairs if i % 2 == 0 else pairs[::-1]:
            samples[name].append(timed(argv))
        if i < max(5, rounds // 4):
            loops = [("loop", [python, "-c", LOOP]), ("loop+filter", [FILTER, python, "-c", LOOP])]
            for name, argv in loops if i % 2 == 0 else loops[::-1]:
                samples[name].append(timed(argv))
    diff = [b - a for a, b in zip(samples["without"], samples["with"], strict=True)]
    ms = 1000.0
    print(f"N={rounds} invocations, {len(samples['loop'])} loops of 1e6 getppid")
    for name, values in samples.items():
        shown = " ".join(f"{v * ms:.1f}" for v in values)
        print(f"{name}: median {statistics.median(values) * ms:.1f} ms  [{shown}]")
    print(f"paired difference per invocation: median {statistics.median(diff) * ms:.1f} ms")
    per_call = (
        statistics.median(samples["loop+filter"]) - statistics.median(samples["loop"])
    ) / 1e6
    print(f"per system call under the filter: {per_call * 1e9:.0f} ns (difference of medians)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
