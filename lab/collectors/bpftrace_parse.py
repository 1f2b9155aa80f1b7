"""What a bpftrace session printed (its ``-o`` output, ``bpftrace.txt``), parsed and cut per
invocation: the "Attaching" line, the BEGIN and END markers, probe lines (``<nsecs> cg=<cgroup>
pid=<pid> <kind> key=value ...``), "Lost N events" warnings and the final maps, every map keyed
by the cgroup id that names the invocation; and the ``observed.bpftrace`` record of one
invocation made of them. No I/O: the session (``lab.collectors.bpftrace``) reads the file.

    trace = parse_bpftrace(Path("bpftrace.txt").read_text())
    trace.complete                                  # the END marker was printed: maps are final
    one = trace.for_cgroup(4242)
    one.maps["@hash_calls"]                         # "256", verbatim
    one.destinations                                # ["127.0.0.1:40001", ...]
    summarize(one, trace, defined_counters(script), absent_symbols=()).hash_calls   # 256
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from lab.collectors.bpftrace_script import UPROBE_COUNTERS
from lab.model.observed import BPFTRACE_COUNTERS, BpftraceSummary

#: printed by the script's BEGIN probe, once every probe is attached
ATTACHED_MARKER = "lab: attached"
#: printed by the script's END probe; bpftrace prints the final maps right after it
END_MARKER = "lab: end of trace"

#: summary key for each counter map: the map is named for its key (docs/architecture.md)
COUNTER_KEYS: dict[str, str] = {f"@{key}": key for key in BPFTRACE_COUNTERS}
#: the ``call=N`` codes of the script's syscall address lines (probes/client.bt)
CALLS: dict[int, str] = {1: "connect", 2: "sendto", 3: "sendmsg", 4: "sendmmsg"}
#: io_uring opcodes that can carry a destination: the kernel tracepoints decode an inet one
#: (tcp-connect, datagram), nothing here decodes a unix-domain one
URING_NETWORK_OPS = frozenset(
    {"CONNECT", "SEND", "SENDMSG", "SEND_ZC", "SENDMSG_ZC", "URING_CMD", "SENDTO"}
)

#: bpftrace's announcement before it attaches (the session waits for that many links)
ATTACHING = re.compile(r"^Attaching (\d+) probes?\.\.\.$", re.MULTILINE)
_LOST = re.compile(r"Lost (\d+) events")
_EVENT = re.compile(
    r"^(?P<nsecs>\d+) cg=(?P<cg>\d+) pid=(?P<pid>\d+) (?P<kind>[\w=-]+)(?P<rest>.*)$"
)
_MAP = re.compile(r"^(?P<name>@\w+)(?:\[(?P<key>[^\]]*)\])?: (?P<value>.*)$")


@dataclass
class BpftraceEvent:
    """One line printed by a probe: ``<nsecs> cg=<cgroup> pid=<pid> <kind> key=value ...``."""

    nsecs: int
    cgroup: int
    pid: int
    kind: str
    fields: dict[str, str]


def _event(line: str) -> BpftraceEvent | None:
    m = _EVENT.match(line)
    if m is None:
        return None
    rest = m.group("rest")
    fields: dict[str, str] = {}
    # a unix path may hold spaces: it is always the last field
    head, sep, path = rest.partition(" path=")
    for token in head.split():
        key, eq, value = token.partition("=")
        if eq:
            fields[key] = value
    if sep:
        fields["path"] = path
    kind = m.group("kind")
    if kind.startswith("call="):
        code = kind.partition("=")[2]
        kind = CALLS.get(int(code), f"call-{code}") if code.isdigit() else kind
    return BpftraceEvent(
        int(m.group("nsecs")), int(m.group("cg")), int(m.group("pid")), kind, fields
    )


#: ICMP (v4 and v6) types that answer or report rather than contact (echo replies,
#: destination unreachable, time exceeded, …): the kernel sends them, not the client
ICMP_NOT_CONTACTS = frozenset({"0", "1", "2", "3", "4", "5", "11", "12", "14", "16", "18", "129"})


def _destination(event: BpftraceEvent) -> str | None:
    family = event.fields.get("family")
    if event.kind == "datagram" and event.fields.get("proto") in ("1", "58"):
        if event.fields.get("type") in ICMP_NOT_CONTACTS:
            return None
        return f"icmp:{event.fields.get('addr')}"
    if family == "inet":
        return f"{event.fields.get('addr')}:{event.fields.get('port')}"
    if family == "inet6":
        return f"[{event.fields.get('addr')}]:{event.fields.get('port')}"
    if family == "unix":
        # an abstract socket's name starts with NUL, so bpftrace prints it as ""
        path = event.fields.get("path", "")
        return f"unix:{path}" if path else "unix:@"
    return None  # AF_UNSPEC (UDP disconnect), netlink ...: not a network destination


#: events whose address is a destination the client contacted or tried to
DESTINATION_EVENTS = frozenset({*CALLS.values(), "tcp-connect", "datagram"})


@dataclass
class InvocationTrace:
    """The part of a session's output that belongs to one cgroup (one invocation)."""

    #: final map values of this cgroup, verbatim: {"@hash_calls": "256", ...}; a map keyed
    #: by more than the cgroup keeps the rest of its key: {"@uring_ops[SENDMSG]": "1"}
    maps: dict[str, str] = field(default_factory=dict)
    events: list[BpftraceEvent] = field(default_factory=list)
    #: this cgroup's lines of the raw output, verbatim
    lines: list[str] = field(default_factory=list)

    @property
    def destinations(self) -> list[str]:
        found = {
            d
            for e in self.events
            if e.kind in DESTINATION_EVENTS
            for d in [_destination(e)]
            if d is not None
        }
        return sorted(found)

    def function_entries(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.events:
            if e.kind in UPROBE_COUNTERS:
                counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts

    def counter(self, name: str) -> int | None:
        raw = self.maps.get(name)
        try:
            return None if raw is None else int(raw)
        except ValueError:
            return None

    def uring_ops(self) -> dict[str, int]:
        ops: dict[str, int] = {}
        for name, value in self.maps.items():
            if name.startswith("@uring_ops[") and value.isdigit():
                ops[name[len("@uring_ops[") : -1].strip()] = int(value)
        return dict(sorted(ops.items()))

    def undecodable(self) -> list[str]:
        """Channels this trace saw used but cannot decode every destination of."""
        reasons = [
            f"io_uring {op}: an inet destination is seen by the kernel tracepoints, a "
            "unix-domain one is not decoded"
            for op in self.uring_ops()
            if op in URING_NETWORK_OPS
        ]
        undecoded = self.counter("@undecoded") or 0
        if undecoded:
            reasons.append(f"sendmmsg: {undecoded} message address(es) after the first not decoded")
        compat = self.counter("@compat_syscalls") or 0
        if compat:
            # their numbers are the 32-bit table's: none is decoded, so none is vouched for
            reasons.append(f"{compat} 32-bit system call(s) (int 0x80) not decoded")
        return reasons


@dataclass
class BpftraceTrace:
    """What a session's ``bpftrace.txt`` says."""

    #: (cgroup id, rest of the key or "", map name, value, the line verbatim)
    map_rows: list[tuple[int | None, str, str, str, str]] = field(default_factory=list)
    events: list[BpftraceEvent] = field(default_factory=list)
    event_lines: list[str] = field(default_factory=list)
    attached_probes: int | None = None
    #: the BEGIN probe ran: every probe was attached
    attached: bool = False
    lost_events: int = 0
    #: the END probe ran (its marker line is present), so the maps after it are final
    complete: bool = False
    unparsed_lines: int = 0
    #: the lines that concern no cgroup in particular (attaching, markers, losses)
    session_lines: list[str] = field(default_factory=list)

    def for_cgroup(self, cgroup: int) -> InvocationTrace:
        trace = InvocationTrace()
        for event, line in zip(self.events, self.event_lines, strict=True):
            if event.cgroup == cgroup:
                trace.events.append(event)
                trace.lines.append(line)
        for cg, rest, name, value, line in self.map_rows:
            if cg == cgroup:
                trace.maps[f"{name}[{rest}]" if rest else name] = value
                trace.lines.append(line)
        return trace


def parse_bpftrace(text: str) -> BpftraceTrace:
    """Parse bpftrace's ``-o`` output: the "Attaching" line, the BEGIN marker, probe lines,
    "Lost N events" warnings, the END marker and the map values printed after it."""
    parsed = BpftraceTrace()
    for line in text.splitlines():
        line = line.rstrip()
        if not line:
            continue
        if (m := ATTACHING.match(line)) is not None:
            parsed.attached_probes = int(m.group(1))
            parsed.session_lines.append(line)
        elif line == ATTACHED_MARKER:
            parsed.attached = True
            parsed.session_lines.append(line)
        elif (m := _LOST.search(line)) is not None:
            parsed.lost_events += int(m.group(1))
            parsed.session_lines.append(line)
        elif line == END_MARKER:
            parsed.complete = True
            parsed.session_lines.append(line)
        elif parsed.complete and (m := _MAP.match(line)) is not None:
            key = m.group("key") or ""
            first, _, rest = key.partition(",")
            cgroup = int(first) if first.strip().isdigit() else None
            parsed.map_rows.append((cgroup, rest.strip(), m.group("name"), m.group("value"), line))
        elif (event := _event(line)) is not None:
            parsed.events.append(event)
            parsed.event_lines.append(line)
        else:
            parsed.unparsed_lines += 1
    return parsed


def summarize(
    trace: InvocationTrace,
    session: BpftraceTrace,
    counters: Sequence[str],
    absent_symbols: Sequence[str],
    cgroup_id: int | None = None,
) -> BpftraceSummary:
    """The ``observed.bpftrace`` record of one invocation.

    ``counters`` are the maps the script defines; one that a complete session did not print
    for this cgroup belongs to probes that attached and never fired for it: an observed 0.
    A counter fed by a uprobe whose symbol the binary lacks is None (and its function
    listed in ``absent_symbols``), never reported as 0; so is one the script does not define.
    """
    absent_maps = {UPROBE_COUNTERS[s] for s in absent_symbols if s in UPROBE_COUNTERS}
    values: dict[str, int] = {}
    unprinted: list[str] = []
    for name, key in COUNTER_KEYS.items():
        if name in absent_maps or name not in counters:
            continue
        value = trace.counter(name)
        if value is None:
            unprinted.append(name)
        values[key] = 0 if value is None else value
    return BpftraceSummary(
        # a counter left out above is None: not observed, never 0
        **{key: values.get(key) for key in BPFTRACE_COUNTERS},
        destinations=tuple(trace.destinations),
        maps=dict(sorted(trace.maps.items())),
        absent_symbols=tuple(sorted(absent_symbols)),
        unprinted_maps=tuple(unprinted),
        function_entries=dict(sorted(trace.function_entries().items())),
        uring_ops=trace.uring_ops(),
        undecodable=tuple(trace.undecodable()),
        attached_probes=session.attached_probes,
        lost_events=session.lost_events,
        # printf lines (destinations, entries) can be lost; the maps never are
        events_complete=session.lost_events == 0,
        cgroup_id=cgroup_id,
    )
