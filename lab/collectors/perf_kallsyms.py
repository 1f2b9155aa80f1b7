"""The kernel's symbol table read once per perf pass, not by every perf process.

``/proc/kallsyms`` is generated as it is read: every one of its ~120,000 lines is expanded
by the kernel on the reader's CPU (about 40 ms of system time a read on the lab's machine).
``perf record`` (6.1) opened it seven times for one command (strace), ``perf report``
twice: about 0.1 s of every perf-recorded invocation and 0.03-0.05 s of every report, on a
machine whose traced passes keep both cores busy. A pass therefore copies the table once
into its private scratch directory (root's, 0700, removed with the pass; never the evidence
directory: the table holds the kernel's addresses), and

* ``perf report`` reads the copy (its ``--kallsyms`` option; ``perf annotate`` has none);
* ``perf record`` runs in a mount namespace of its own (``unshare --mount --propagation
  private``: nothing reaches the host's mounts) where the copy is bind-mounted over
  ``/proc/kallsyms``. The client is not in it: bwrap mounts a procfs of its own for the
  sandbox, so the client reads the kernel's table, as before.

The copy is the table as the kernel printed it a moment before, for the same boot: the
same kernel mapping and reference symbol go into ``perf.data``, and the reports print the
same lines (``tests/integration/test_perf_kallsyms.py``). Where the copy cannot be made or
the namespace cannot be entered here, perf reads ``/proc/kallsyms`` itself, as before.

    table = snapshot(ctx.scratch)           # Path, or None (perf then reads /proc/kallsyms)
    argv = bind_prefix(table) + perf_argv   # [] when the namespace is not possible here
    report_args = kallsyms_args(table)      # ["--kallsyms=<copy>"] or []
    # perf record wraps the jail; bind_prefix is put in front of perf's own argv
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from lab.host import procs

KALLSYMS = Path("/proc/kallsyms")
COPY_NAME = "kallsyms"
#: binds the copy ("$1") over /proc/kallsyms in the new mount namespace, then runs the rest;
#: if the bind fails, perf still runs and reads the kernel's own table
_BIND = 'mount --bind -- "$1" /proc/kallsyms 2>/dev/null; shift; exec "$@"'

_lock = threading.Lock()
#: the namespace's prefix once probed (``_namespace_prefix``)
_namespace: list[str] | None = None


def snapshot(scratch: Path | None) -> Path | None:
    """The pass's copy of the kernel's symbol table (made on first use), or None when there
    is no scratch directory or the table cannot be read or written."""
    if scratch is None:
        return None
    copy = scratch / COPY_NAME
    with _lock:
        if copy.exists():
            return copy
        try:
            data = KALLSYMS.read_bytes()
            if not data:
                return None
            partial = scratch / (COPY_NAME + ".partial")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            partial.replace(copy)
        except OSError:
            return None
    return copy


def namespace_possible() -> bool:
    """Whether this process may give perf a mount namespace of its own (asked once)."""
    return bool(_namespace_prefix())


def _namespace_prefix() -> list[str]:
    """``unshare … sh -c BIND sh``, the prefix before the copy's path, found and probed once
    ([] where the namespace is not possible here)."""
    global _namespace
    with _lock:
        if _namespace is None:
            unshare, sh, true = (shutil.which(tool) for tool in ("unshare", "sh", "true"))
            _namespace = []
            if unshare is not None and sh is not None and true is not None:
                enter = [unshare, "--mount", "--propagation", "private", "--"]
                if _runs([*enter, true]):
                    _namespace = [*enter, sh, "-c", _BIND, "sh"]
        return _namespace


def _runs(argv: list[str]) -> bool:
    try:
        done = procs.run(
            argv, purpose="a mount namespace for perf record (probe)", timeout=10, accept=None
        )
    except OSError:
        return False
    return done.exit_status == 0


def bind_prefix(table: Path | None) -> list[str]:
    """What runs ``perf record`` with ``table`` over /proc/kallsyms ([] without a table or
    where the namespace is not possible)."""
    prefix = [] if table is None else _namespace_prefix()
    return [*prefix, str(table)] if prefix else []


def kallsyms_args(table: Path | None) -> list[str]:
    """``perf report``'s option to read ``table`` (a copy ``snapshot`` made; [] without
    one)."""
    return [] if table is None else [f"--kallsyms={table}"]
