"""The instrument floor: a minimal reference uploader timed exactly like the clients, so a
reader of a candidate/baseline ratio sees how much of each median is the lab's own time
(the sandbox's set-up, the receiver's consumption and commit) rather than the client's.

    floor = build(scratch / "floor", log)        # cc native/reference/uploader.c
    floor.binary                                  # None when it could not be built
    floor.describe()                              # what the timing record says about it

The uploader (``native/reference/uploader.c``) is the least a correct protocol-v1 client
can do: one mmap, one SHA-256 call, HAVE, then PUT from the mapping. A build failure is
recorded as the reason the floor is missing; it never fails the evaluation.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from lab import resources
from lab.host import procs
from lab.host.digest import sha256_file

#: the same warnings-as-errors C11 flags as the seeded client (native/Makefile)
CFLAGS = ("-std=c11", "-Wall", "-Wextra", "-Werror", "-O2")


@dataclass(frozen=True)
class Floor:
    binary: Path | None
    source_sha256: str | None
    reason: str | None = None

    def describe(self) -> dict[str, str | None]:
        """The reference's identity (or why it is missing), for the timing record."""
        return {
            "source": "native/reference/uploader.c",
            "source_sha256": self.source_sha256,
            "binary_sha256": sha256_file(self.binary) if self.binary else None,
            "reason": self.reason,
        }


def build(out_dir: Path, log: procs.CommandLog | None) -> Floor:
    """Compile the reference uploader into ``out_dir``; a failure is a recorded reason."""
    source = resources.path("native/reference/uploader.c")
    if not source.is_file():
        return Floor(None, None, f"{source} is missing from this checkout")
    source_sha = sha256_file(source)
    cc = shutil.which("cc")
    if cc is None:
        return Floor(None, source_sha, "no C compiler (cc) on PATH to build the reference")
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / "reference-uploader"
    try:
        procs.run(
            [cc, *CFLAGS, "-o", str(binary), str(source), "-lcrypto"],
            purpose="build the instrument floor's reference uploader",
            log=log,
            tool="cc",
            timeout=120.0,
        )
    except procs.CommandFailed as exc:
        return Floor(None, source_sha, f"the reference uploader did not build: {exc}")
    return Floor(binary, source_sha)
