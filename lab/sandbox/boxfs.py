"""The client's writable directories (HOME and /tmp) as bounded file systems, and the removal
of a pass's scratch directory without recursing in Python.

Each writable directory is a tmpfs (util-linux ``mount -t tmpfs -o size=N,nr_inodes=M``)
mounted on the host in the pass's root-only scratch directory and bound into the sandbox by
bwrap: it lives as long as the pass (what a client keeps between its invocations persists,
as before) and no longer. Its pages are charged to the memory cgroup of the process that
writes them, the client's, so they count against ``memory_max`` too. A client that fills one
gets ENOSPC; the host's disk never sees a byte of it. What is in use after each invocation is
read with ``statvfs`` (``usage``) and recorded.

    mount_bounded(path, size=256 << 20, inodes=65536, uid=uid, gid=gid, log=log)
    mount_layered(cache, lower=warm, rw=bounded_dir, log=log)   # reads warm, writes bounded
    usage(path)                         # DiskUse(bytes_used=…, inodes_used=…, full=…)
    remove_tree(scratch, log=log)       # unmounts what is mounted below, then rm -rf

``remove_tree`` runs coreutils ``rm -rf --one-file-system`` through the one process wrapper
(``lab.host.procs``): a 3,000-level tree a client left is removed without Python recursion
(``shutil.rmtree`` raises RecursionError on it), and never crosses into another mount.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.errors import SandboxError
from lab.host import procs

#: the tmpfs "device" name, which makes the lab's mounts recognisable in /proc/mounts
SOURCE = "lab-box"
#: where util-linux and coreutils live when the lab's PATH is narrower (a test, a CI job)
_SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def _system_tool(name: str) -> str:
    """``name`` on PATH, else in the system directories (mount, umount and rm are part of
    every Debian system; the clean-up must find them even under a narrowed PATH)."""
    return procs.which(name) or shutil.which(name, path=_SYSTEM_PATH) or name


@dataclass(frozen=True)
class DiskUse:
    """What one bounded directory held after an invocation (``statvfs``)."""

    bytes_used: int
    bytes_max: int
    inodes_used: int
    inodes_max: int

    @property
    def full(self) -> bool:
        """At its bound (bytes or inodes): a write beyond it got ENOSPC. A tmpfs keeps its
        blocks in pages, so "full" is within one page of the size."""
        return self.bytes_used + 4096 >= self.bytes_max or self.inodes_used + 1 >= self.inodes_max

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes_used": self.bytes_used,
            "bytes_max": self.bytes_max,
            "inodes_used": self.inodes_used,
            "inodes_max": self.inodes_max,
            "full": self.full,
        }


def mount_bounded(path: Path, *, size: int, inodes: int, uid: int, gid: int, log: Any) -> None:
    """Mount a tmpfs of ``size`` bytes and ``inodes`` inodes at ``path`` (an existing empty
    directory), owned by ``uid``:``gid``, mode 0700, nosuid, nodev."""
    options = f"size={size},nr_inodes={inodes},mode=0700,uid={uid},gid={gid},nosuid,nodev"
    try:
        procs.run(
            [_system_tool("mount"), "-t", "tmpfs", "-o", options, SOURCE, str(path)],
            purpose=f"bounded client directory ({size} bytes)",
            log=log,
            timeout=30.0,
        )
    except (procs.CommandFailed, OSError) as exc:
        raise SandboxError(
            f"cannot mount the client's bounded directory at {path} ({exc}); the sandbox "
            "needs to mount a tmpfs (root, CAP_SYS_ADMIN)."
        ) from exc


def _mount(argv: list[str], path: Path, what: str, log: Any) -> None:
    try:
        procs.run([_system_tool("mount"), *argv, str(path)], purpose=what, log=log, timeout=30.0)
    except (procs.CommandFailed, OSError) as exc:
        raise SandboxError(
            f"cannot mount {what} at {path} ({exc}); the sandbox needs to mount file systems "
            "(root, CAP_SYS_ADMIN)."
        ) from exc


def mount_layered(path: Path, *, lower: Path, rw: Path, log: Any) -> None:
    """An overlay at ``path`` (an existing empty directory): ``lower`` read through it and
    never written (the warm build cache, frozen), every write copied up into ``rw/upper``
    (``rw``: a bounded tmpfs of ``mount_bounded``, so the writes meet its bound). No byte of
    ``lower`` is copied: the cost is one mount."""
    upper, work = rw / "upper", rw / "work"
    for made in (upper, work):
        made.mkdir(mode=0o700)
    st = os.stat(rw)
    os.chown(upper, st.st_uid, st.st_gid)  # the merged root is the upper's: the client's
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    _mount(["-t", "overlay", "-o", options, "lab-layer"], path, "a layered build cache", log)


def bind(source: Path, path: Path, *, log: Any) -> None:
    """``source`` (a bounded tmpfs) seen at ``path`` too (an existing empty directory)."""
    _mount(["--bind", str(source)], path, "a bounded build cache", log)


def usage(path: Path) -> DiskUse | None:
    """Bytes and inodes in use in the file system at ``path``; None if it cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return DiskUse(
        bytes_used=(st.f_blocks - st.f_bfree) * st.f_frsize,
        bytes_max=st.f_blocks * st.f_frsize,
        inodes_used=st.f_files - st.f_ffree,
        inodes_max=st.f_files,
    )


def _unescape(field: str) -> str:
    """A mountinfo path field: space, tab, newline and backslash are octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mounts_under(path: Path, mountinfo: str | None = None) -> list[Path]:
    """Mount points at or below ``path`` in this mount namespace, deepest first."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text(errors="replace")
        except OSError:
            return []
    root = str(path).rstrip("/")
    found: list[Path] = []
    for line in mountinfo.split("\n"):
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        target = _unescape(fields[4])
        if target == root or target.startswith(root + "/"):
            found.append(Path(target))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def remove_tree(path: Path, *, log: Any = None) -> str | None:
    """Unmount whatever is mounted at or below ``path``, then remove it with ``rm -rf
    --one-file-system``; None once it is gone, else one sentence saying what is left (never
    raises: a pass's clean-up must not cost the run its results)."""
    if not os.path.lexists(path):
        return None
    try:
        for mount in mounts_under(path):
            done = procs.run(
                [_system_tool("umount"), str(mount)],
                purpose="unmount a bounded client directory",
                log=log,
                timeout=60.0,
                accept=None,
            )
            if done.exit_status != 0:  # busy: detach it now, the kernel frees it when unused
                procs.run(
                    [_system_tool("umount"), "--lazy", str(mount)],
                    purpose="detach a busy bounded client directory",
                    log=log,
                    timeout=60.0,
                    accept=None,
                )
        done = procs.run(
            [_system_tool("rm"), "-rf", "--one-file-system", "--", str(path)],
            purpose="remove a pass's scratch directory",
            log=log,
            timeout=600.0,
            accept=None,
        )
    except OSError as exc:
        return f"{path} could not be removed ({exc})"
    if os.path.lexists(path):
        excerpt = done.stderr_excerpt()
        return f"{path} could not be removed (rm exited {done.exit_status}: {excerpt})"
    return None
