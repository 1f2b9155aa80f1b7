"""What the round-4 sandbox additions cost (issue 21), as root: paired runs of ``bwrap …
/bin/true`` without and with a PID namespace and the ``/proc`` remount ``hidepid=invisible``
(per invocation), and a bounded tmpfs mount + unmount (two per pass). Prints medians.

    python benchmarks/sandbox_additions.py 40
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

BASE = [
    "bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
    "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64", "--dev", "/dev", "--proc", "/proc",
    "--unshare-ipc", "--unshare-uts", "--new-session", "--clearenv",
]  # fmt: skip
BEFORE = [*BASE, "--die-with-parent", "--", "/bin/sh", "-c", 'exec "$@"', "sh", "/bin/true"]
AFTER = [
    *BASE, "--unshare-pid", "--", "/bin/sh", "-c",
    '"$1" -o remount,hidepid=invisible /proc || exit 125; shift; exec "$@"',
    "sh", "/usr/bin/mount", "/bin/true",
]  # fmt: skip


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True)
    return time.monotonic() - t0


def tmpfs_pair() -> float:
    where = tempfile.mkdtemp()
    options = "size=268435456,nr_inodes=65536,mode=0700"
    t0 = time.monotonic()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "lab-box", where], check=True)
    subprocess.run(["umount", where], check=True)
    elapsed = time.monotonic() - t0
    os.rmdir(where)
    return elapsed


def main(rounds: int) -> None:
    before: list[float] = []
    after: list[float] = []
    mounts: list[float] = []
    for i in range(rounds):
        order = [(BEFORE, before), (AFTER, after)]
        for argv, sink in order if i % 2 == 0 else order[::-1]:
            sink.append(timed(argv))
        mounts.append(tmpfs_pair())
    diff = [b - a for a, b in zip(before, after, strict=True)]
    ms = 1000.0
    print(
        f"N={rounds}: without {statistics.median(before) * ms:.1f} ms, with "
        f"{statistics.median(after) * ms:.1f} ms, paired difference "
        f"{statistics.median(diff) * ms:.1f} ms; tmpfs mount+umount "
        f"{statistics.median(mounts) * ms:.1f} ms"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
