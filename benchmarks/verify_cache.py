"""What bounding a verification command's Go build cache costs (issue 21), as root, on a warm
cache given as the argument: per command, the old private copy (``cp -al`` of the frozen
cache, every directory chowned, ``rm -rf`` afterwards) against the new layer (a bounded
tmpfs, an overlay over the frozen cache, both unmounted afterwards); once per run, copying
the warming run's cache out of its tmpfs (``cp -a``). Prints medians and every sample.

    python benchmarks/verify_cache.py /path/to/warm/gocache 15
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(*argv: str) -> None:
    subprocess.run(list(argv), check=True)


def old_copy(cache: Path, work: Path) -> float:
    dest = work / "copy"
    t0 = time.monotonic()
    run("cp", "-al", str(cache), str(dest))
    for path in [dest, *(p for p in dest.rglob("*") if p.is_dir() and not p.is_symlink())]:
        os.chown(path, 65534, 65534)
        path.chmod(0o700)
    run("rm", "-rf", "--one-file-system", str(dest))
    return time.monotonic() - t0


def new_layer(cache: Path, work: Path) -> float:
    rw, merged = work / "rw", work / "merged"
    t0 = time.monotonic()
    rw.mkdir()
    merged.mkdir()
    bound = "size=268435456,nr_inodes=65536,mode=0700"
    run("mount", "-t", "tmpfs", "-o", bound, "lab-box", str(rw))
    (rw / "upper").mkdir()
    (rw / "work").mkdir()
    options = f"lowerdir={cache},upperdir={rw}/upper,workdir={rw}/work"
    run("mount", "-t", "overlay", "-o", options, "lab-layer", str(merged))
    run("umount", str(merged))
    run("umount", str(rw))
    rw.rmdir()
    merged.rmdir()
    return time.monotonic() - t0


def copy_out(cache: Path, work: Path) -> float:
    seed = work / "seed"
    seed.mkdir()
    run("mount", "-t", "tmpfs", "-o", "size=268435456", "lab-box", str(seed))
    run("cp", "-a", f"{cache}/.", str(seed))
    t0 = time.monotonic()
    run("cp", "-a", "--", str(seed), str(work / "frozen"))
    elapsed = time.monotonic() - t0
    run("umount", str(seed))
    seed.rmdir()
    shutil.rmtree(work / "frozen")
    return elapsed


def main(cache: Path, rounds: int) -> None:
    files = sum(1 for p in cache.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    samples: dict[str, list[float]] = {"old cp -al": [], "new overlay": [], "copy-out": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(rounds):
            pair = [("old cp -al", old_copy), ("new overlay", new_layer)]
            for name, step in pair if i % 2 == 0 else pair[::-1]:
                samples[name].append(step(cache, work))
            samples["copy-out"].append(copy_out(cache, work))
    print(f"cache: {files} files, {size / 1e6:.1f} MB; N={rounds}")
    for name, values in samples.items():
        shown = " ".join(f"{v * 1000:.1f}" for v in values)
        print(f"{name}: median {statistics.median(values) * 1000:.1f} ms  [{shown}]")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 15)
