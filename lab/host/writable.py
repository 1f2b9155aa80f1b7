"""Whether a directory can be created and written: decided before anything is written.

    check_writable_dir(Path("artifacts"), option="--out")   # UsageError naming the option

The check walks up to the nearest part of the path that exists: it must be a directory, not
on a kernel pseudo-file system (``/proc``, ``/sys``, ...: creating files there fails or does
something else entirely) and writable. Nothing is created: a run that is refused for
another reason leaves no empty directory behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from lab.errors import LabError, UsageError

#: file systems where a run directory or a key cannot meaningfully live (types as the kernel
#: names them in /proc/self/mountinfo)
PSEUDO_FILESYSTEMS = frozenset(
    {
        "autofs",
        "binfmt_misc",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "debugfs",
        "devpts",
        "devtmpfs",
        "efivarfs",
        "fusectl",
        "hugetlbfs",
        "mqueue",
        "nsfs",
        "proc",
        "pstore",
        "securityfs",
        "sysfs",
        "tracefs",
    }
)
MOUNTINFO = Path("/proc/self/mountinfo")


def filesystem_type(path: Path, mountinfo: Path = MOUNTINFO) -> str | None:
    """The type of the file system ``path`` is on (the longest mount point above it)."""
    try:
        lines = mountinfo.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    target = os.path.realpath(path)
    best, kind = "", None
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        mount = parts[4].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, rest.split()[0]
    return kind


def check_writable_dir(path: Path, *, option: str, error: type[LabError] = UsageError) -> None:
    """Raise ``error`` (one sentence naming ``option``) unless ``path`` can be a directory
    the lab creates and writes."""
    existing = Path(os.path.abspath(path))
    while not os.path.lexists(existing):
        existing = existing.parent
    where = f"{option} {path}"
    if not existing.is_dir():
        raise error(f"{where}: {existing} is not a directory; choose a directory.")
    kind = filesystem_type(existing)
    if kind in PSEUDO_FILESYSTEMS:
        raise error(
            f"{where}: {existing} is on {kind}, a kernel pseudo-file system; choose a "
            "directory on a real disk."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise error(
            f"{where}: {existing} is not writable (read-only or no permission); choose a "
            "writable directory."
        )
