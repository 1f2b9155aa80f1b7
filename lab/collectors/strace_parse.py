"""An ``strace -f -ttt -T -yy -s 16`` trace read back: its lines as system calls (pid, epoch
time, name, arguments, result, duration; unfinished and resumed calls joined), the client's
part of them (the sandbox's own steps set apart) and the ``observed.strace`` summary made of
them: source bytes read, bytes sent on sockets, connects, destinations. Pure: text in,
records out; the collector (``lab.collectors.strace``) runs strace.

    summary = parse_strace(Path("strace.txt").read_text(), "/run/x/source.bin",
                           client_pid=4242, execs_before_client=JAIL_EXECS)
    summary.source_bytes_read, summary.destinations   # 262144, ["127.0.0.1:40001"]
    summary.summary().to_dict()                        # observed.strace

    calls, summary = iter_syscalls(text)               # every call, whoever made it
    destinations_in('3, {sa_family=AF_INET, sin_port=htons(40001), '
                    'sin_addr=inet_addr("127.0.0.1")}, 16')     # ["127.0.0.1:40001"]
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field, replace

from lab.collectors.strace_args import (  # re-exported: the call parser's public helpers
    descriptor as descriptor,
)
from lab.collectors.strace_args import destinations_in as destinations_in
from lab.collectors.strace_args import is_socket as is_socket
from lab.collectors.strace_args import split_args as split_args
from lab.collectors.strace_args import unescape as unescape
from lab.model.observed import DESCRIPTOR_KEYS, StraceSummary

#: calls whose first argument is a descriptor they read from
READ_CALLS = frozenset({"read", "pread64", "readv", "preadv", "preadv2"})
#: calls that move bytes from their *second* descriptor (in_fd) to their first (out_fd)
TRANSFER_CALLS = frozenset({"sendfile", "sendfile64"})
#: calls that move bytes from their first descriptor to another one
SPLICE_CALLS = frozenset({"splice", "copy_file_range"})
#: calls whose first argument is a descriptor they write to
WRITE_CALLS = frozenset(
    {"write", "writev", "pwrite64", "pwritev", "pwritev2", "sendto", "sendmsg", "sendmmsg"}
)
#: calls that may carry a destination address
ADDRESS_CALLS = frozenset({"connect", "sendto", "sendmsg", "sendmmsg"})

_LINE = re.compile(r"^(?:(?P<pid>\d+)\s+)?(?P<ts>\d+\.\d+)\s+(?P<body>.*)$")
_EXITED = re.compile(r"^\+\+\+ exited with (?P<code>\d+) \+\+\+$")
_KILLED = re.compile(r"^\+\+\+ killed by (?P<sig>SIG[A-Z0-9+-]+)(?: \(core dumped\))? \+\+\+$")
_UNFINISHED = " <unfinished ...>"
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$")
_CALL = re.compile(r"^(?P<name>\w+)\((?P<rest>.*)$")
_DURATION = re.compile(r"\s+<(?P<secs>\d+\.\d+)>$")
# What follows the last ") = ": a number, or "?", optionally a decoded descriptor, an errno
# name and a parenthesised comment ("= -1 ENOENT (No such file or directory)").
_RESULT = re.compile(
    r"^(?P<ret>-?\d+|0x[0-9a-fA-F]+|\?)(?:<(?P<deco>.*)>)?(?:\s+(?P<errno>E[A-Z0-9]+))?"
    r"(?:\s+<unavailable>)?(?:\s+\(.*\))?$"
)
# With --pidns-translation, a pid the traced process sees in its own PID namespace (the
# sandbox's) is followed by the tracer's: "= 2 /* 4507 in strace's PID NS */"
_PIDNS = re.compile(r"(-?\d+) /\* (\d+) in strace's PID NS \*/")
# strace pads short calls so that results line up: "brk(NULL)       = 0x55..."
_EQUALS = re.compile(r"\)\s+= ")
_MSG_LEN = re.compile(r"msg_len=(\d+)")


@dataclass
class Syscall:
    """One completed system call (an unfinished/resumed pair is joined into one)."""

    pid: int
    ts: float
    name: str
    args: str
    ret: int | None
    errno: str | None
    duration_s: float | None
    decoded: str | None = None  # the result's -yy decoration: "= 3</path>" -> "/path"


@dataclass
class StraceTally:
    """What ``strace.txt`` says about one invocation, counted as the trace is read;
    :meth:`summary` is the model's frozen ``observed.strace`` record."""

    source_bytes_read: int = 0
    source_reads: int = 0
    source_mmaps: int = 0
    connects: int = 0
    destinations: list[str] = field(default_factory=list)
    sent_bytes: int = 0
    syscalls: int = 0
    processes: int = 0
    initial_pid: int | None = None
    exit_status: int | None = None
    killed_by_signal: int | None = None
    #: True when the initial process's end ("+++ exited/killed +++") is in the trace
    complete: bool = False
    #: channels the client used whose destinations a syscall trace cannot see
    undecodable: list[str] = field(default_factory=list)
    #: calls of the sandbox's own steps (before the client's exec), left out of the rest
    sandbox_syscalls: int = 0
    #: False when a trace of a sandboxed run (``client_pid``) holds no execve of the client
    #: after the sandbox's steps: nothing of it is the client's, and its zeros mean nothing
    client_found: bool = True
    #: lines that are neither calls, resumptions, signals nor exits (kept count, not hidden)
    unparsed_lines: int = 0
    #: the client's data calls whose descriptor strace printed bare, without ``-yy``'s path
    #: (it could not read /proc/PID/fd: without CAP_SYS_PTRACE over the client's user)
    undecoded_descriptors: int = 0

    def summary(self) -> StraceSummary:
        summary = StraceSummary(
            connects=self.connects,
            destinations=tuple(self.destinations),
            syscalls=self.syscalls,
            processes=self.processes,
            exit_status=self.exit_status,
            killed_by_signal=self.killed_by_signal,
            unparsed_lines=self.unparsed_lines,
            undecodable=tuple(self.undecodable),
            sandbox_syscalls=self.sandbox_syscalls,
            source_bytes_read=self.source_bytes_read,
            source_reads=self.source_reads,
            source_mmaps=self.source_mmaps,
            sent_bytes=self.sent_bytes,
        )
        if not self.undecoded_descriptors:
            return summary
        # which file or socket a call used is unknown, so these are not zeros: absent
        why = (
            f"strace printed {self.undecoded_descriptors} of the client's descriptors "
            "without their paths (it could not read /proc/PID/fd: the tracer lacks "
            "CAP_SYS_PTRACE over the client's user), so the bytes per file and socket "
            "were not observed"
        )
        return replace(
            summary,
            source_bytes_read=None,
            source_reads=None,
            source_mmaps=None,
            sent_bytes=None,
            unobserved=dict.fromkeys(DESCRIPTOR_KEYS, why),
        )


def _signal_number(name: str) -> int | None:
    try:
        return int(signal.Signals[name])
    except KeyError:
        return None


def _number(raw: str) -> int:
    """A result as strace prints it: decimal, hexadecimal, or octal with a leading 0
    (``umask(…) = 022``)."""
    if len(raw) > 1 and raw.startswith("0") and raw[1:].isdigit():
        return int(raw, 8)
    return int(raw, 0)


def _result(tail: str) -> tuple[str, int | None, str | None, float | None, str | None] | None:
    """Split ``"args) = ret<deco> ... <dur>"`` into (args, ret, errno, duration, deco)."""
    duration = None
    m = _DURATION.search(tail)
    if m is not None:
        duration = float(m.group("secs"))
        tail = tail[: m.start()]
    tail = _PIDNS.sub(r"\2", tail)  # the tracer's (host) pid: the one every line names
    for eq in reversed(list(_EQUALS.finditer(tail))):
        r = _RESULT.match(tail[eq.end() :].strip())
        if r is not None:
            raw = r.group("ret")
            ret = None if raw == "?" else _number(raw)
            return tail[: eq.start()], ret, r.group("errno"), duration, r.group("deco")
    return None


def iter_syscalls(text: str) -> tuple[list[Syscall], StraceTally]:
    """Every completed call in order of completion, and the per-process facts
    (processes, exits, unparsed lines) in a partly filled summary."""
    calls: list[Syscall] = []
    summary = StraceTally()
    pending: dict[int, tuple[str, str, float]] = {}
    pids: set[int] = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            summary.unparsed_lines += 1
            continue
        pid = int(m.group("pid") or 0)
        ts = float(m.group("ts"))
        body = m.group("body").rstrip()
        pids.add(pid)
        if summary.initial_pid is None:
            summary.initial_pid = pid
        if body.startswith("+++"):
            exited = _EXITED.match(body)
            killed = _KILLED.match(body)
            if pid == summary.initial_pid and (exited or killed):
                summary.complete = True
                if exited:
                    summary.exit_status = int(exited.group("code"))
                elif killed:
                    summary.killed_by_signal = _signal_number(killed.group("sig"))
            elif not (exited or killed):
                summary.unparsed_lines += 1
            continue
        if body.startswith("---"):  # a signal delivery, not a call
            continue
        if body.endswith(_UNFINISHED):
            call = _CALL.match(body[: -len(_UNFINISHED)])
            if call is None:
                summary.unparsed_lines += 1
                continue
            pending[pid] = (call.group("name"), call.group("rest"), ts)
            continue
        resumed = _RESUMED.match(body)
        if resumed is not None:
            name = resumed.group("name")
            first = pending.pop(pid, None)
            if first is not None and first[0] == name:
                whole, ts = first[1] + resumed.group("rest"), first[2]
            else:  # the start was lost (strace attached mid-call); keep what we have
                whole = resumed.group("rest")
        else:
            call = _CALL.match(body)
            if call is None:
                summary.unparsed_lines += 1
                continue
            name, whole = call.group("name"), call.group("rest")
        parsed = _result(whole)
        if parsed is None:
            # "exit(0) = ?" has a result; a call cut off by the end of the trace has none
            summary.unparsed_lines += 1
            continue
        calls.append(Syscall(pid, ts, name, *parsed))
    # calls that never resumed (the process died inside them) still happened
    for pid, (name, rest, ts) in pending.items():
        calls.append(Syscall(pid, ts, name, rest, None, None, None))
    summary.processes = len(pids)
    return calls, summary


#: calls that create a process or thread; their result is the new pid
FORK_CALLS = frozenset({"clone", "clone3", "fork", "vfork"})
#: calls whose network effects (io_uring's CONNECT, SENDMSG, …) a syscall trace cannot see
OPAQUE_CALLS = frozenset({"io_uring_setup", "io_uring_enter", "io_uring_register"})


def client_calls(
    calls: list[Syscall],
    client_pid: int,
    execs_before_client: int,
    *,
    attached_execs: int | None = None,
) -> tuple[list[Syscall], int]:
    """The calls of the client and its descendants: ``client_pid``'s calls from its
    ``execs_before_client + 1``-th successful execve on (the ones before are the sandbox's
    steps: the joining shell, capsh, prlimit), and every call of a process it created after
    that. Returns (those calls, how many processes they come from).

    ``attached_execs``: the count instead when the tracer attached to ``client_pid`` itself
    (at the jail's gate, ``lab.sandbox.gate``) rather than running the jail: such a trace
    begins with ``client_pid``'s own calls, where one that ran the jail begins with the
    jail's first command's ``execve`` (another process)."""
    if attached_execs is not None and calls and calls[0].pid == client_pid:
        execs_before_client = attached_execs
    children: dict[int, list[int]] = {}
    execs = 0
    started_at: int | None = None
    for i, call in enumerate(calls):
        if call.pid == client_pid and call.name == "execve" and call.ret == 0:
            execs += 1
            if execs == execs_before_client + 1 and started_at is None:
                started_at = i
        forked = call.name in FORK_CALLS and call.ret is not None and call.ret > 0
        if forked and (call.pid != client_pid or started_at is not None):
            children.setdefault(call.pid, []).append(int(call.ret or 0))
    if started_at is None:
        return [], 0
    family = {client_pid}
    todo = [client_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in family:
                family.add(child)
                todo.append(child)
    kept = [
        c
        for i, c in enumerate(calls)
        if c.pid in family and (c.pid != client_pid or i >= started_at)
    ]
    return kept, len(family)


def parse_strace(
    text: str,
    source_path: str,
    *,
    client_pid: int | None = None,
    execs_before_client: int = 0,
    attached_execs: int | None = None,
) -> StraceTally:
    """Summarise an ``strace -f -ttt -T -yy`` trace.

    With ``client_pid`` (the sandbox's main process), only the client's part of the trace
    counts (:func:`client_calls`): the sandbox's own steps are counted apart
    (``sandbox_syscalls``) and never taken for the client's; ``attached_execs``: as
    :func:`client_calls` takes it.

    ``source_path`` is the source file's resolved path (strace decodes descriptors from
    ``/proc``, so it shows the real path, not a symlink). Source bytes are the positive
    return values of read/pread64/readv/preadv(2) on a descriptor decoded as that path,
    plus sendfile/splice/copy_file_range out of it; ``source_reads`` counts those calls
    whatever their result. ``sent_bytes`` sums successful writes and sends on socket
    descriptors (sendmmsg by its ``msg_len`` fields). ``destinations`` are the addresses of
    connect, sendto, sendmsg and sendmmsg, whatever their result.
    """
    calls, summary = iter_syscalls(text)
    if client_pid is not None:
        total = len(calls)
        calls, summary.processes = client_calls(
            calls, client_pid, execs_before_client, attached_execs=attached_execs
        )
        summary.sandbox_syscalls = total - len(calls)
        summary.client_found = bool(calls)  # the client's part begins with its execve
    _count(summary, calls, source_path)
    return summary


def _count(summary: StraceTally, calls: list[Syscall], source_path: str) -> None:
    """``parse_strace``'s figures of ``calls`` (the client's), added to ``summary``."""
    destinations: set[str] = set()
    opaque: set[str] = set()
    summary.syscalls = len(calls)
    for call in calls:
        args = split_args(call.args)
        moved = call.ret if call.ret is not None and call.ret > 0 else 0
        source, sink = _data_ends(call.name, args)
        if _bare_descriptor(call.name, args):
            summary.undecoded_descriptors += 1
        if source is not None and unescape(source) == source_path:
            summary.source_reads += 1
            summary.source_bytes_read += moved
        if sink is not None and is_socket(sink):
            if call.name == "sendmmsg":
                # its result counts messages; the bytes are each message's msg_len
                moved = sum(int(n) for n in _MSG_LEN.findall(call.args)) if moved else 0
            summary.sent_bytes += moved
        if call.name in ("mmap", "mmap2") and len(args) > 4:
            fd = descriptor(args[4])
            if fd is not None and unescape(fd[1]) == source_path:
                summary.source_mmaps += 1
        if call.name == "connect":
            summary.connects += 1
        if call.name in ADDRESS_CALLS:
            destinations.update(destinations_in(call.args))
        if call.name in OPAQUE_CALLS:
            opaque.add(call.name)
    summary.destinations = sorted(destinations)
    if opaque:
        summary.undecodable = [
            f"io_uring ({', '.join(sorted(opaque))}): the operations it submits are not "
            "system calls, so their destinations are not in the trace"
        ]


def _bare_descriptor(name: str, args: list[str]) -> bool:
    """A data call whose first descriptor strace printed as a bare number (``read(3, …``)
    where ``-yy`` prints ``read(3</path>, …``: the decoding failed, not the data."""
    if name not in READ_CALLS and name not in WRITE_CALLS:
        return False
    return bool(args) and args[0].isdigit()


def _data_ends(name: str, args: list[str]) -> tuple[str | None, str | None]:
    """The decoded descriptors a call moves data from and to (None when it does not)."""

    def deco(index: int) -> str | None:
        found = descriptor(args[index]) if len(args) > index else None
        return found[1] if found is not None else None

    if name in READ_CALLS:
        return deco(0), None
    if name in WRITE_CALLS:
        return None, deco(0)
    if name in TRANSFER_CALLS:  # sendfile(out_fd, in_fd, ...)
        return deco(1), deco(0)
    if name in SPLICE_CALLS:  # splice(fd_in, off_in, fd_out, ...), copy_file_range alike
        return deco(0), deco(2)
    return None, None
