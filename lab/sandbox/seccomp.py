"""The sandbox's system-call filter and the observer of what it refused.

The filter is ``native/filter/lab-filter.c`` (libseccomp; Debian ``libseccomp-dev``), built
once per source digest into the lab's cache directory and bound read-only into every
sandbox at ``INSIDE``. The jail runs it between capsh and prlimit (``lab.sandbox.jail``): it
loads a filter that refuses, with EPERM, the calls a backup client never needs (``ptrace``,
``keyctl``, ``bpf``, ``perf_event_open``, ``mount``, ``unshare``, ``userfaultfd`` and their
kin, and a ``clone`` into a new namespace: ``lab-filter --list``), refuses ``clone3`` with
ENOSYS unlogged (the C library falls back to ``clone``), then execs the rest. The tracers
run outside it (they are not the client's descendants), so strace, perf and bpftrace see
what they saw before.

Every refusal is logged by the kernel (the filter carries SECCOMP_FILTER_FLAG_LOG) as an
audit record, ``type=1326 … uid=U … syscall=N … code=0x50000``, which reaches ``/dev/kmsg``
when no audit daemon takes it. ``KmsgWatch`` opens ``/dev/kmsg`` before an invocation, skips
what was there, and afterwards keeps the records of the client user's uid, verbatim:

    watch = KmsgWatch.open()                      # before the client starts
    ...                                           # the invocation
    refused = watch.collect(uid=uid, names=refused_calls())   # Refusals
    refused.calls                                 # {"keyctl": 3, ...}; raw lines in .raw

What this observer cannot see is said, never counted as zero: no readable ``/dev/kmsg``
leaves the refusals ``not-observed``; the kernel's printk rate limit (10 records per 5 s)
drops records of a client refusing in a loop, so the counts are lower bounds and the
``suppressed`` figure says how many the kernel reported dropping; the records name a uid,
not an invocation, so invocations of the same client user running side by side (``--jobs``)
share what each window saw.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.host import procs
from lab.sandbox.helpers import FILTER

#: where the filter program is inside every sandbox (bound read-only)
INSIDE = "/run/lab-filter"
OBSERVER = "kernel audit log (/dev/kmsg)"
KMSG = Path("/dev/kmsg")
#: the kernel's audit record of a seccomp action
_AUDIT = re.compile(
    r"audit: type=1326 .*?\buid=(\d+) .*?\barch=([0-9a-f]+) syscall=(\d+) .*?\bcode=(0x[0-9a-f]+)"
)
_SUPPRESSED = re.compile(r"kauditd_printk_skb: (\d+) callbacks suppressed")
#: SECCOMP_RET_ERRNO, the action of every refusal (the audit code holds the action only)
_ERRNO_ACTION = 0x50000
_lock = threading.Lock()
_listed: dict[Path, dict[str, str]] = {}


def source() -> Path:
    return FILTER.source()


def source_digest() -> str:
    """The filter's source, hashed (part of every evaluation id: ``SandboxSettings``)."""
    return FILTER.digest()


def helper() -> Path:
    """The built filter program (compiled with ``cc … -lseccomp`` on first use); raises
    SandboxError naming what is missing when it cannot be built."""
    return FILTER.path()


def key(arch: str, number: int) -> str:
    """A refused call's key: its audit architecture (hex, as the kernel writes it) and its
    number in that architecture's table (int 0x80's numbers are not the 64-bit ones)."""
    return f"{arch.lower()}:{number}"


def refused_calls(program: Path | None = None) -> dict[str, str]:
    """``key(arch, number)`` -> name of every call the filter refuses, in every system-call
    table it covers on this machine (x86_64: the 64-bit one, int 0x80's and x32's)."""
    program = program or helper()
    with _lock:
        known = _listed.get(program)
    if known is not None:
        return known
    done = procs.run(
        [str(program), "--list"], purpose="the filter's refused calls", timeout=30, capture=True
    )
    table: dict[str, str] = {}
    for line in (done.output or b"").decode("ascii", "replace").split("\n"):
        words = line.split(" ")
        if len(words) == 3 and words[1].isdigit():
            table[key(words[2], int(words[1]))] = words[0]
    with _lock:
        _listed[program] = table
    return table


@dataclass
class Refusals:
    """What one invocation's window of the kernel log held for the client user."""

    observed: bool
    #: why nothing could be observed (``observed`` False)
    reason: str | None = None
    #: refused call -> how many records name it (a lower bound: ``suppressed``)
    calls: dict[str, int] = field(default_factory=dict)
    #: records the kernel said it dropped in the window (printk's rate limit)
    suppressed: int = 0
    #: the matching records, verbatim
    raw: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "observer": OBSERVER,
            "observed": self.observed,
            "reason": self.reason,
            "calls": dict(sorted(self.calls.items())),
            "total": self.total,
            "suppressed": self.suppressed,
            "raw": list(self.raw[:64]),
        }


def parse(records: list[str], *, uid: int, names: dict[str, str]) -> Refusals:
    """The refusals of ``uid`` among kernel log records (``PRIO,SEQ,USEC,FLAGS;TEXT``)."""
    found = Refusals(observed=True)
    for record in records:
        text = record.partition(";")[2] or record
        hit = _AUDIT.search(text)
        if hit is not None and int(hit.group(1)) == uid:
            if int(hit.group(4), 16) & 0x7FFF0000 != _ERRNO_ACTION:
                continue
            arch, number = hit.group(2), int(hit.group(3))
            name = names.get(key(arch, number), f"syscall {number} (arch {arch})")
            found.calls[name] = found.calls.get(name, 0) + 1
            found.raw.append(text)
        elif (quiet := _SUPPRESSED.search(text)) is not None:
            found.suppressed += int(quiet.group(1))
    return found


class KmsgWatch:
    """``/dev/kmsg`` from the moment it is opened (older records skipped)."""

    def __init__(self, fd: int | None, problem: str | None) -> None:
        self._fd = fd
        self._problem = problem

    @classmethod
    def open(cls) -> KmsgWatch:
        try:
            fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            return cls(None, f"{KMSG} cannot be read here ({exc.strerror})")
        os.lseek(fd, 0, os.SEEK_END)
        return cls(fd, None)

    def collect(self, *, uid: int, names: dict[str, str]) -> Refusals:
        """The client user's refusals since ``open``; closes the watch."""
        if self._fd is None:
            return Refusals(observed=False, reason=self._problem)
        records: list[str] = []
        lost = False
        try:
            while True:
                try:
                    chunk = os.read(self._fd, 8192)
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno == errno.EPIPE:  # the ring overwrote records: go on
                        lost = True
                        continue
                    raise
                if not chunk:
                    break
                records.append(chunk.decode("utf-8", "replace").rstrip("\n"))
        finally:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        found = parse(records, uid=uid, names=names)
        if lost:
            found.reason = "the kernel's log ring overwrote records during the invocation"
        return found
