"""The agent's processes witnessed while it runs: the kernel's exec trace of its cgroup
(``lab.collectors.bpftrace_exec``), and afterwards what it left in its HOME and /tmp
(listed with ``lstat``, bounded, symbolic links never followed).

    witness = ProcessWitness(out_dir=rep_dir / "processes", log=log, task=task.to_dict())
    witness.open(group.v2)          # bpftrace attached to the agent's cgroup
    ...                             # the agent runs
    record = witness.close(home=home, tmp=tmp)   # ProcessRecord
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.collectors.bpftrace_exec import Exec, ExecTrace
from lab.errors import LabError
from lab.host import procs
from lab.model.egress import SocketCall
from lab.model.processes import (
    EXECS_KEPT,
    LEFT_LISTED,
    ExecRow,
    ProcessRecord,
    verification_commands,
    verification_runs,
)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def list_left(root: Path, limit: int = LEFT_LISTED) -> tuple[list[dict[str, Any]], bool]:
    """Every entry under ``root`` (path relative to it, type, size), sorted, at most
    ``limit``; True when there were more. Links are listed, never followed."""
    found: list[dict[str, Any]] = []
    more = False
    for top, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = Path(top) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if len(found) >= limit:
                more = True
                break
            found.append(
                {
                    "path": str(path.relative_to(root)),
                    "type": _kind(info.st_mode),
                    "bytes": info.st_size if stat.S_ISREG(info.st_mode) else None,
                }
            )
        if more:
            break
    return found, more


def _row(e: Exec, zero_ns: int) -> ExecRow:
    def seconds(ns: int | None) -> float | None:
        return None if ns is None else round((ns - zero_ns) / 1e9, 3)

    return ExecRow(
        pid=e.pid,
        parent=e.parent,
        path=e.path,
        argv=tuple(e.argv),
        start_s=seconds(e.start_ns) or 0.0,
        end_s=seconds(e.end_ns),
        exit_status=e.exit_status,
        signal=e.signal,
    )


class ProcessWitness:
    def __init__(self, *, out_dir: Path, log: procs.CommandLog, task: Mapping[str, Any]) -> None:
        self.out_dir = out_dir
        self.log = log
        self.commands = verification_commands(task)
        self.trace: ExecTrace | None = None
        self.error: str | None = "the exec trace was not started"
        self.record: ProcessRecord | None = None
        #: the agent's cgroup v2 directory, once it runs
        self.cgroup: Path | None = None
        #: its connects, from the same trace (None: not traced), once closed
        self.calls: list[SocketCall] | None = None

    def kill(self) -> None:
        """Kill everything in the agent's cgroup (``--stop-on-plateau``)."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")

    def open(self, cgroup: Path) -> None:
        """Attach the exec trace to ``cgroup``; a trace that cannot start is recorded (the
        agent still runs, its processes then not observed)."""
        self.cgroup = cgroup
        trace = ExecTrace(cgroup=cgroup, out_dir=self.out_dir, log=self.log)
        try:
            trace.start()
            self.trace, self.error = trace, None
        except LabError as error:
            self.error = str(error)

    def close(self, *, home: Path, tmp: Path) -> ProcessRecord:
        execs: list[ExecRow] = []
        count: int | None = None
        if self.trace is not None:
            seen, self.error = self.trace.stop()
            self.calls = self.trace.calls
            execs = [_row(e, self.trace.started_ns) for e in seen]
            count = len(execs)
        left: dict[str, Any] = {}
        for name, root in (("home", home), ("tmp", tmp)):
            left[name], more = list_left(root)
            left["truncated"] = bool(left.get("truncated")) or more
        self.record = ProcessRecord(
            execs=tuple(execs[:EXECS_KEPT]),
            exec_count=count,
            error=self.error,
            left=left,
            verification=verification_runs(execs, self.commands) if count is not None else (),
        )
        return self.record
