"""Every program a cgroup runs, from the kernel: bpftrace on ``sys_enter_execve`` (the argv
asked for), ``sched_process_exec`` (the program that really started, its pid and parent)
and ``sched_process_exit`` (its exit status or signal), filtered by ``cgroupid()`` to one
cgroup v2 directory, so every descendant of the agent is seen and nothing of the lab is.

    trace = ExecTrace(cgroup=Path("/sys/fs/cgroup/unified/lab/…/agent-r1"), out_dir=d, log=log)
    trace.start()                     # returns once every probe is attached
    ...                               # the agent runs in that cgroup
    execs, error = trace.stop()       # [Exec(pid, parent, path, argv, start_ns, end_ns, ...)]

Kept verbatim in ``out_dir``: the script (``exec.bt``), bpftrace's output (``exec.txt``)
and its stderr. The argv is what ``execve`` was asked for (up to bpftrace's 16 words), paired
with the exec that succeeded for that pid; a failed ``execve`` (a PATH search) starts nothing
and is not listed. Times are CLOCK_MONOTONIC nanoseconds (bpftrace's ``nsecs``).
"""

from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from lab.collectors.bpftrace import _stderr_excerpt, attached_links
from lab.collectors.bpftrace_parse import ATTACHING
from lab.collectors.bpftrace_script import cgroup_filter
from lab.errors import CollectorError
from lab.host import procs

SCRIPT_NAME = "exec.bt"
OUTPUT_NAME = "exec.txt"
STDERR_NAME = "exec.stderr.txt"
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 30.0
END_MARKER = "lab-exec-trace end"

SCRIPT = """\
BEGIN { printf("lab-exec-trace begin\\n"); }
tracepoint:syscalls:sys_enter_execve /__FILTER__/ {
  printf("ARGV %d ", pid); join(args->argv, "\\t");
}
tracepoint:sched:sched_process_exec /__FILTER__/ {
  printf("EXEC %llu %d %d %s\\n", nsecs, pid, curtask->real_parent->tgid, str(args->filename));
}
tracepoint:sched:sched_process_exit /__FILTER__ && pid == tid/ {
  printf("EXIT %llu %d %d\\n", nsecs, pid, curtask->exit_code);
}
END { printf("lab-exec-trace end\\n"); }
"""

_EXEC = re.compile(r"^EXEC (\d+) (\d+) (\d+) (.*)$")
_EXIT = re.compile(r"^EXIT (\d+) (\d+) (-?\d+)$")
_ARGV = re.compile(r"^ARGV (\d+) (.*)$")


@dataclass
class Exec:
    """One program image a process of the cgroup ran."""

    pid: int
    parent: int
    path: str
    argv: list[str]
    start_ns: int
    #: when the image ended: its process exited, or it exec'd another (None: still running)
    end_ns: int | None = None
    exit_status: int | None = None
    #: the signal that ended it (None: it exited, or it has not ended)
    signal: int | None = None


def parse_exec_trace(text: str) -> list[Exec]:
    """bpftrace's output -> every successful exec, in order, with its end."""
    asked: dict[int, list[str]] = {}
    current: dict[int, Exec] = {}
    found: list[Exec] = []
    for line in text.splitlines():
        if m := _ARGV.match(line):
            asked[int(m.group(1))] = m.group(2).split("\t")
        elif m := _EXEC.match(line):
            start, pid, parent, path = int(m.group(1)), int(m.group(2)), int(m.group(3)), m[4]
            previous = current.get(pid)
            if previous is not None and previous.end_ns is None:
                previous.end_ns = start  # the same process exec'd another program
            item = Exec(pid, parent, path, asked.pop(pid, [path]), start)
            current[pid] = item
            found.append(item)
        elif m := _EXIT.match(line):
            end, pid, code = int(m.group(1)), int(m.group(2)), int(m.group(3))
            ended = current.pop(pid, None)
            if ended is not None:
                item = ended
                item.end_ns = end
                if code & 0x7F:
                    item.signal = code & 0x7F
                else:
                    item.exit_status = (code >> 8) & 0xFF
    return found


class ExecTrace:
    def __init__(self, *, cgroup: Path, out_dir: Path, log: procs.CommandLog) -> None:
        self.cgroup = cgroup
        self.out_dir = out_dir
        self.log = log
        self._bg: procs.Background | None = None
        #: CLOCK_MONOTONIC ns when the trace was attached (the agent starts after it)
        self.started_ns = 0

    @property
    def output(self) -> Path:
        return self.out_dir / OUTPUT_NAME

    def start(self) -> None:
        """Start bpftrace; return once every probe is attached. Raises CollectorError."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        script = self.out_dir / SCRIPT_NAME
        script.write_text(SCRIPT.replace("__FILTER__", cgroup_filter([self.cgroup])))
        tool = procs.which("bpftrace")
        if tool is None:
            raise CollectorError(procs.missing_tool("bpftrace"))
        self._bg = procs.Background(
            [tool, "-o", str(self.output), str(script)],
            purpose="bpftrace: every exec and exit of the agent's cgroup",
            log=self.log,
            tool="bpftrace",
            stderr=self.out_dir / STDERR_NAME,
            stop_signal=signal.SIGINT,
            grace_s=STOP_GRACE_S,
        )
        self._bg.__enter__()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.output.read_text(errors="replace") if self.output.exists() else ""
            announced = ATTACHING.search(text)
            if announced is not None and attached_links(self._bg.pid) >= int(announced[1]):
                time.sleep(0.05)
                self.started_ns = time.monotonic_ns()
                return
            if not self._bg.alive():
                self._bg.stop()
                why = _stderr_excerpt(self.out_dir / STDERR_NAME) or "it exited"
                raise CollectorError(f"bpftrace could not trace the agent's execs: {why}")
            time.sleep(0.02)
        self._bg.stop()
        raise CollectorError(f"bpftrace did not attach within {READY_TIMEOUT_S:g} s.")

    def stop(self) -> tuple[list[Exec], str | None]:
        """Detach; every exec seen, and one sentence when the trace is incomplete."""
        if self._bg is None:
            return [], "the exec trace never started"
        done = self._bg.stop()
        self._bg = None
        text = self.output.read_text(errors="replace") if self.output.exists() else ""
        error = None
        if done.timed_out or done.killed_by_signal is not None or END_MARKER not in text:
            error = f"{OUTPUT_NAME} ends before bpftrace's END marker; the trace is truncated"
        return parse_exec_trace(text), error
