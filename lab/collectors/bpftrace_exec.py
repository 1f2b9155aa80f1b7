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

import dataclasses
import ipaddress
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
from lab.model.egress import SocketCall

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
tracepoint:syscalls:sys_enter_connect /__FILTER__/ {
  printf("SOCK connect %d %d %d %r\\n", pid, tid, args->addrlen, buf(args->uservaddr, 64));
}
tracepoint:syscalls:sys_enter_sendto /__FILTER__ && args->addr != 0/ {
  printf("SOCK sendto %d %d %d %r\\n", pid, tid, args->addr_len, buf(args->addr, 64));
}
tracepoint:syscalls:sys_exit_connect, tracepoint:syscalls:sys_exit_sendto /__FILTER__/ {
  printf("SOCKRET %d %d\\n", tid, args->ret);
}
tracepoint:syscalls:sys_enter_socket
/__FILTER__ && (args->family == 17 || (args->type & 0xf) == 3)/ {
  printf("SOCK socket %d %d %d %d\\n", pid, tid, args->family, args->type & 0xf);
  @raw[tid] = 1;
}
tracepoint:syscalls:sys_exit_socket /@raw[tid]/ {
  printf("SOCKRET %d %d\\n", tid, args->ret);
  delete(@raw[tid]);
}
END { printf("lab-exec-trace end\\n"); clear(@raw); }
"""

_EXEC = re.compile(r"^EXEC (\d+) (\d+) (\d+) (.*)$")
_EXIT = re.compile(r"^EXIT (\d+) (\d+) (-?\d+)$")
_ARGV = re.compile(r"^ARGV (\d+) (.*)$")
_SOCK = re.compile(r"^SOCK (connect|sendto) (\d+) (\d+) (-?\d+) (.*)$")
_SOCKRET = re.compile(r"^SOCKRET (\d+) (-?\d+)$")
#: a raw (SOCK_RAW) or packet (AF_PACKET) socket asked for: its own way past the forwarder
_RAW = re.compile(r"^SOCK socket (\d+) (\d+) (\d+) (\d+)$")
SOCK_RAW = 3
_ESCAPED = re.compile(r"\\x([0-9a-fA-F]{2})|(.)", re.DOTALL)
#: address families (linux/socket.h) by number
FAMILIES = {0: "unspec", 1: "unix", 2: "inet", 10: "inet6", 16: "netlink", 17: "packet"}


def unescape(text: str) -> bytes:
    """bpftrace's ``%r`` of a buffer (``\\xNN`` for unprintable bytes) -> the bytes."""
    return bytes(int(m[1], 16) if m[1] else ord(m[2]) & 0xFF for m in _ESCAPED.finditer(text))


def decode_sockaddr(raw: bytes, length: int) -> tuple[str, str]:
    """(family, address) of a ``struct sockaddr``: ``inet`` 1.2.3.4:80, ``inet6``
    [::1]:80, ``unix`` a path (``@name`` abstract; cut at the 64 bytes read), else the
    family's number and no address."""
    raw = raw[: max(0, min(length, len(raw)))]
    if len(raw) < 2:
        return "unknown", ""
    number = int.from_bytes(raw[:2], "little")
    family = FAMILIES.get(number, str(number))
    if family == "inet" and len(raw) >= 8:
        return family, f"{ipaddress.IPv4Address(raw[4:8])}:{int.from_bytes(raw[2:4], 'big')}"
    if family == "inet6" and len(raw) >= 24:
        return family, f"[{ipaddress.IPv6Address(raw[8:24])}]:{int.from_bytes(raw[2:4], 'big')}"
    if family == "unix":
        path = raw[2:]
        if path[:1] == b"\0":
            return family, "@" + path[1:].split(b"\0")[0].decode("utf-8", "replace")
        return family, path.split(b"\0")[0].decode("utf-8", "replace")
    return family, ""


def parse_socket_calls(text: str) -> list[SocketCall]:
    """Every connect (and sendto with an address) of the cgroup, and every raw or packet
    socket it asked for (address ``raw`` or ``packet``), with what each returned."""
    calls: list[SocketCall] = []
    waiting: dict[int, int] = {}  # tid -> index of its call awaiting the return value
    for line in text.splitlines():
        if m := _RAW.match(line):
            number = int(m[3])
            family = FAMILIES.get(number, str(number))
            kind = "raw" if int(m[4]) == SOCK_RAW else "packet"
            waiting[int(m[2])] = len(calls)
            calls.append(SocketCall(call="socket", pid=int(m[1]), family=family, address=kind))
        elif m := _SOCK.match(line):
            family, address = decode_sockaddr(unescape(m[5]), int(m[4]))
            waiting[int(m[3])] = len(calls)
            calls.append(SocketCall(call=m[1], pid=int(m[2]), family=family, address=address))
        elif (m := _SOCKRET.match(line)) and int(m[1]) in waiting:
            n = waiting.pop(int(m[1]))
            calls[n] = dataclasses.replace(calls[n], ret=int(m[2]))
    return calls


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
        #: every connect / addressed sendto of the cgroup, once stopped
        self.calls: list[SocketCall] = []
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
        self.calls = parse_socket_calls(text)
        return parse_exec_trace(text), error
