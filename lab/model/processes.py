"""The agent's processes as evidence, no I/O: every program its cgroup ran (argv, parent,
start and end, exit status or signal, from the kernel: ``lab.collectors.bpftrace_exec``),
what it left in its HOME and /tmp, and how often it ran the task's verification commands
with which exit statuses.

    record = ProcessRecord(execs=(ExecRow(...), ...), error=None, left={...})
    record.verification(verification_commands(task))
        # [{"command": "make -C native", "runs": 2, "exit_statuses": [2, 0]}]

A figure the trace could not give is None with its reason (``error``), never 0.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: what the speed-up task's text names as its check ("built with ``make -C native``"), used
#: when a task file states no verification command of its own
DEFAULT_VERIFICATION: tuple[tuple[str, ...], ...] = (("make", "-C", "native"),)
#: at most this many execs are kept in the record (all are in the raw trace)
EXECS_KEPT = 500
#: at most this many entries of HOME and /tmp are listed
LEFT_LISTED = 200


@dataclass(frozen=True, kw_only=True)
class ExecRow:
    pid: int
    parent: int
    path: str
    argv: tuple[str, ...]
    #: seconds after the trace attached (just before the agent started)
    start_s: float
    end_s: float | None
    exit_status: int | None
    signal: int | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecRow:
        return cls(
            pid=int(data["pid"]),
            parent=int(data["parent"]),
            path=str(data["path"]),
            argv=tuple(str(w) for w in data["argv"]),
            start_s=float(data["start_s"]),
            end_s=data.get("end_s"),
            exit_status=data.get("exit_status"),
            signal=data.get("signal"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "parent": self.parent,
            "path": self.path,
            "argv": list(self.argv),
            "start_s": self.start_s,
            "end_s": self.end_s,
            "exit_status": self.exit_status,
            "signal": self.signal,
        }


def verification_commands(task: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The task's verification commands as argv prefixes (``verification`` entries with an
    ``argv`` or a command string, when the task file has them), else the default."""
    given = task.get("verification")
    found: list[tuple[str, ...]] = []
    for item in given if isinstance(given, list) else []:
        argv = item.get("argv") if isinstance(item, dict) else item
        if isinstance(argv, str):
            argv = shlex.split(argv)
        if isinstance(argv, list) and argv and all(isinstance(w, str) for w in argv):
            found.append(tuple(argv))
    return found or list(DEFAULT_VERIFICATION)


def _runs(row: ExecRow, command: Sequence[str]) -> bool:
    argv = row.argv
    if len(argv) < len(command) or not argv:
        return False
    name = argv[0].rsplit("/", 1)[-1]
    return name == command[0].rsplit("/", 1)[-1] and tuple(argv[1 : len(command)]) == tuple(
        command[1:]
    )


@dataclass(frozen=True, kw_only=True)
class ProcessRecord:
    execs: tuple[ExecRow, ...] = ()
    #: execs seen in all (``execs`` keeps the first EXECS_KEPT)
    exec_count: int | None = None
    #: why the exec trace is missing or incomplete (None: complete)
    error: str | None = None
    #: HOME and /tmp after the agent: {"home": [{"path", "type", "bytes"}], "tmp": [...],
    #: "truncated": bool}
    left: dict[str, Any] = field(default_factory=dict)
    #: the task's verification commands: [{"command", "runs", "exit_statuses"}]
    verification: tuple[dict[str, Any], ...] = ()

    @property
    def observed(self) -> bool:
        return self.exec_count is not None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessRecord:
        return cls(
            execs=tuple(ExecRow.from_dict(e) for e in data.get("execs") or ()),
            exec_count=data.get("exec_count"),
            error=data.get("error"),
            left=dict(data.get("left") or {}),
            verification=tuple(dict(v) for v in data.get("verification") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "exec_count": self.exec_count,
            "execs": [e.to_dict() for e in self.execs],
            "error": self.error,
            "left": dict(self.left),
            "verification": [dict(v) for v in self.verification],
        }


def verification_runs(
    execs: Sequence[ExecRow], commands: Sequence[Sequence[str]]
) -> tuple[dict[str, Any], ...]:
    """How many times each verification command ran, and its exit statuses in order (None
    for one killed by a signal or still running at the end)."""
    rows = []
    for command in commands:
        ran = [e for e in execs if _runs(e, command)]
        rows.append(
            {
                "command": shlex.join(command),
                "runs": len(ran),
                "exit_statuses": [e.exit_status for e in ran],
            }
        )
    return tuple(rows)


def verification_words(record: ProcessRecord | None) -> str:
    """ "make -C native ran 2× (exit 2, 0)" — or why it is not known."""
    if record is None:
        return "processes not witnessed"
    if not record.observed:
        return f"processes not observed: {record.error}"
    parts = []
    for row in record.verification:
        statuses = ", ".join("killed" if s is None else str(s) for s in row["exit_statuses"])
        shown = f" (exit {statuses})" if statuses else ""
        parts.append(f"{row['command']} ran {row['runs']}×{shown}")
    return "; ".join(parts) or "no verification command"
