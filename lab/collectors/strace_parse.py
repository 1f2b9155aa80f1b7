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
    r"^(?P<ret>-?\d+|0x[0-9a-fA-F]+|\?)(?P<deco><.*>)?(?:\s+(?P<errno>E[A-Z0-9]+))?"
    r"(?:\s+<unavailable>)?(?:\s+\(.*\))?$"
)
# strace pads short calls so that results line up: "brk(NULL)       = 0x55..."
_EQUALS = re.compile(r"\)\s+= ")
# Decoded sockets look like "TCP:[...]", "UDPv6:[...]", "UNIX-STREAM:[...]", "socket:[123]";
# files are absolute paths; pipes and anonymous inodes are lower-case "pipe:[...]".
_SOCKET_DECO = re.compile(r"(?:socket|[A-Z][A-Za-z0-9-]*):\[")
_INET = re.compile(
    r"sa_family=AF_INET, sin_port=htons\((?P<port>\d+)\), "
    r'sin_addr=inet_addr\("(?P<addr>[0-9.]+)"\)'
)
_INET6 = re.compile(
    r"sa_family=AF_INET6, sin6_port=htons\((?P<port>\d+)\),.*?"
    r'inet_pton\(AF_INET6, "(?P<addr>[0-9a-fA-F:.]+)"'
)
_UNIX = re.compile(r'sa_family=AF_UNIX, sun_path=(?P<abstract>@)?"(?P<path>(?:[^"\\]|\\.)*)"')
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
# Quoted strings that are part of an address and must survive when buffers are blanked.
_ADDRESS_STRING_PREFIXES = ("sun_path=", "sun_path=@", "inet_addr(", "inet_pton(AF_INET6, ")
_MSG_LEN = re.compile(r"msg_len=(\d+)")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "\\": "\\", '"': '"'}


def unescape(text: str) -> str:
    """Undo strace's escaping of a decoded path (``\\76`` for ``>``, ``\\n`` ...)."""

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code[0] == "x":
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _SIMPLE_ESCAPES.get(code, code)

    return _ESCAPE.sub(one, text)


def split_args(text: str) -> list[str]:
    """Split a call's argument text on top-level commas (brackets and strings nest)."""
    args: list[str] = []
    depth = 0
    quoted = False
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "<" and i > start and text[start:i].strip().isdigit():
            # a decoded descriptor "3</path>" or "3<TCP:[a->b]>": skip to its closing ">"
            i = _end_of_decoration(text, i)
            continue
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    tail = text[start:].strip()
    if tail:
        args.append(tail)
    return args


def _end_of_decoration(text: str, lt: int) -> int:
    """Index just past the ``>`` closing the decoration that opens at ``text[lt] == "<"``.

    Paths have their own ``>`` escaped (``\\76``); socket endpoints ("TCP:[a->b]") do not,
    so brackets are balanced first."""
    i = lt + 1
    if _SOCKET_DECO.match(text, i) or text.startswith(("pipe:[", "anon_inode:["), i):
        i = text.index("[", i)
        depth = 0
        while i < len(text):
            if text[i] == "[":
                depth += 1
            elif text[i] == "]":
                depth -= 1
                if depth == 0:
                    break
            i += 1
    end = text.find(">", i)
    return len(text) if end < 0 else end + 1


def descriptor(arg: str) -> tuple[int, str] | None:
    """``"3</tmp/src.bin>"`` -> ``(3, "/tmp/src.bin")``; None for anything else."""
    m = re.match(r"^(\d+)<(.*)>$", arg, re.DOTALL)
    if m is None:
        return None
    return int(m.group(1)), m.group(2)


def is_socket(decoration: str) -> bool:
    return _SOCKET_DECO.match(decoration) is not None


def destinations_in(args: str) -> list[str]:
    """Every socket address in a call's arguments, as ``ip:port``, ``[ip6]:port`` or
    ``unix:/path`` (``unix:@name`` for the abstract namespace). Buffer contents are blanked
    first so that bytes that merely look like an address are not taken for one."""

    def blank(m: re.Match[str]) -> str:
        before = args[: m.start()]
        return m.group(0) if before.endswith(_ADDRESS_STRING_PREFIXES) else '""'

    text = _QUOTED.sub(blank, args)
    found: list[tuple[int, str]] = []
    for m in _INET.finditer(text):
        found.append((m.start(), f"{m.group('addr')}:{m.group('port')}"))
    for m in _INET6.finditer(text):
        found.append((m.start(), f"[{m.group('addr')}]:{m.group('port')}"))
    for m in _UNIX.finditer(text):
        prefix = "@" if m.group("abstract") else ""
        found.append((m.start(), f"unix:{prefix}{unescape(m.group('path'))}"))
    return [d for _, d in sorted(found)]


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


def _result(tail: str) -> tuple[str, int | None, str | None, float | None] | None:
    """Split ``"args) = ret ... <dur>"`` into (args, ret, errno, duration)."""
    duration = None
    m = _DURATION.search(tail)
    if m is not None:
        duration = float(m.group("secs"))
        tail = tail[: m.start()]
    for eq in reversed(list(_EQUALS.finditer(tail))):
        r = _RESULT.match(tail[eq.end() :].strip())
        if r is not None:
            raw = r.group("ret")
            ret = None if raw == "?" else _number(raw)
            return tail[: eq.start()], ret, r.group("errno"), duration
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
        args, ret, errno, duration = parsed
        calls.append(Syscall(pid, ts, name, args, ret, errno, duration))
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
    calls: list[Syscall], client_pid: int, execs_before_client: int
) -> tuple[list[Syscall], int]:
    """The calls of the client and its descendants: ``client_pid``'s calls from its
    ``execs_before_client + 1``-th successful execve on (the ones before are the sandbox's
    steps: the joining shell, capsh, prlimit), and every call of a process it created after
    that. Returns (those calls, how many processes they come from)."""
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
    text: str, source_path: str, *, client_pid: int | None = None, execs_before_client: int = 0
) -> StraceTally:
    """Summarise an ``strace -f -ttt -T -yy`` trace.

    With ``client_pid`` (the sandbox's main process), only the client's part of the trace
    counts (:func:`client_calls`): the sandbox's own steps are counted apart
    (``sandbox_syscalls``) and never taken for the client's.

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
        calls, summary.processes = client_calls(calls, client_pid, execs_before_client)
        summary.sandbox_syscalls = total - len(calls)
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
    return summary


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
