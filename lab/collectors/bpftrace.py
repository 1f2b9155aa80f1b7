"""The bpftrace collector: uprobes on the client's own functions, tracepoints on its
connects, reads, sends, context switches, io_uring submissions, TCP connection attempts and
datagrams, counted in the kernel. One session per pass.

bpftrace attaches once, before the pass's first invocation, and every probe is filtered to
the cgroups of the pass's invocations (``lab.sandbox``): every thread, child, exec'd
program and daemon of a client is seen, none of the instrument is, and every map is keyed
by the cgroup id, which names the invocation. The script is ``probes/client.bt`` with
``__BINARY__`` replaced by the client's path, ``__CGROUPS__`` by the cgroup filter, and the
uprobe block of every function the binary lacks removed (bpftrace refuses to start when a
uprobe cannot attach). Kept per pass: the script run (``bpftrace.bt``), the symbol table it
was checked against (``bpftrace.symbols.txt``) and the whole output (``bpftrace.txt``); per
invocation: the lines of its cgroup, verbatim, in ``inv<N>/bpftrace.txt``.

    session = BpftraceSession()
    status = BpftraceSession.probe()        # root, BTF, tracefs, uprobes, a real attach
    session.start(pass_ctx)                 # returns once the BEGIN probe has run
    ...                                     # the invocations run, each in its own cgroup
    outputs = session.stop()                # {1: CollectorOutput("bpftrace", summary), ...}

    trace = parse_bpftrace(Path("bpftrace.txt").read_text())
    trace.for_cgroup(4242).maps["@hash_calls"]     # "256", verbatim
"""

from __future__ import annotations

import os
import re
import signal
import tempfile
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lab.collectors.base import CollectorOutput, PassContext, SessionCollector
from lab.errors import CollectorError
from lab.host import procs
from lab.host.capabilities import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, effective_mask
from lab.model import ObserverStatus

PROBES_DIR = Path(__file__).resolve().parents[2] / "probes"
DEFAULT_SCRIPT = PROBES_DIR / "client.bt"
SCRIPT_NAME = "bpftrace.bt"
OUTPUT_NAME = "bpftrace.txt"
STDERR_NAME = "bpftrace.stderr.txt"
SYMBOLS_NAME = "bpftrace.symbols.txt"
PLACEHOLDER = "__BINARY__"
CGROUPS_PLACEHOLDER = "__CGROUPS__"
#: printed by the script's BEGIN probe, once every probe is attached
ATTACHED_MARKER = "lab: attached"
#: printed by the script's END probe; bpftrace prints the final maps right after it
END_MARKER = "lab: end of trace"
#: how long bpftrace may take to compile and attach (about 3 s on the lab's machines)
READY_TIMEOUT_S = 60.0
#: how long it may take to print its maps once interrupted
STOP_GRACE_S = 30.0

#: the client functions the script may attach uprobes to, and the map each one feeds
UPROBE_COUNTERS: dict[str, str] = {
    "hash_file": "@hash_calls",
    "send_payload": "@send_payload_calls",
    "busy_wait": "@busy_wait_calls",
}
#: summary key for each counter map (docs/architecture.md)
COUNTER_KEYS: dict[str, str] = {
    "@hash_calls": "hash_calls",
    "@send_payload_calls": "send_payload_calls",
    "@busy_wait_calls": "busy_wait_calls",
    "@connects": "connects",
    "@read_bytes": "read_bytes",
    "@sent_bytes": "sent_bytes",
    "@switches_out": "switches_out",
}
#: the ``call=N`` codes of the script's syscall address lines (probes/client.bt)
CALLS: dict[int, str] = {1: "connect", 2: "sendto", 3: "sendmsg", 4: "sendmmsg"}
#: io_uring opcodes that can carry a destination: the kernel tracepoints decode an inet one
#: (tcp-connect, datagram), nothing here decodes a unix-domain one
URING_NETWORK_OPS = frozenset(
    {"CONNECT", "SEND", "SENDMSG", "SEND_ZC", "SENDMSG_ZC", "URING_CMD", "SENDTO"}
)

BTF = Path("/sys/kernel/btf/vmlinux")
TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
UPROBE_PMU = Path("/sys/bus/event_source/devices/uprobe")

_UPROBE_LINE = re.compile(rf"^uprobe:{PLACEHOLDER}:(?P<name>\w+)")
_RENDERED_UPROBE = re.compile(r"^uprobe:[^:\s]+:(?P<name>\w+)", re.MULTILINE)
_COUNTER_DEF = re.compile(r"(@\w+)(?:\[[^\]]*\])?\s*=\s*(?:count|sum)\(")
_TRACEPOINT = re.compile(r"tracepoint:(\w+):(\w+)")
_ATTACHING = re.compile(r"^Attaching (\d+) probes?\.\.\.$", re.MULTILINE)
_LOST = re.compile(r"Lost (\d+) events")
_EVENT = re.compile(
    r"^(?P<nsecs>\d+) cg=(?P<cg>\d+) pid=(?P<pid>\d+) (?P<kind>[\w=-]+)(?P<rest>.*)$"
)
_MAP = re.compile(r"^(?P<name>@\w+)(?:\[(?P<key>[^\]]*)\])?: (?P<value>.*)$")
_NM_FUNCTION_TYPES = frozenset("TtWwi")


@dataclass(frozen=True)
class RenderedScript:
    """A probe script ready to run against one binary."""

    text: str
    uprobes: tuple[str, ...]
    absent_symbols: tuple[str, ...]


def template_uprobes(template: str) -> list[str]:
    """The functions the template has ``uprobe:__BINARY__:NAME`` blocks for."""
    return [m.group("name") for m in map(_UPROBE_LINE.match, template.splitlines()) if m]


def cgroup_filter(paths: Sequence[Path]) -> str:
    """The probe predicate matching the given cgroup v2 directories."""
    for path in paths:
        if '"' in str(path) or "\\" in str(path):
            raise CollectorError(f"the cgroup path {path} cannot be written in a bpftrace string.")
    return "(" + " || ".join(f'cgroup == cgroupid("{p}")' for p in paths) + ")"


def render_script(
    template: str, binary: str, present_symbols: Collection[str], filter_expr: str
) -> RenderedScript:
    """Substitute the binary's path and the cgroup filter, and drop the uprobe block (its
    first line to the next line that is exactly ``}``) of every function
    ``present_symbols`` lacks."""
    kept: list[str] = []
    uprobes: list[str] = []
    absent: list[str] = []
    skipping = False
    for line in template.splitlines():
        if skipping:
            skipping = line.rstrip() != "}"
            continue
        m = _UPROBE_LINE.match(line)
        if m is not None:
            if m.group("name") in present_symbols:
                uprobes.append(m.group("name"))
            else:
                absent.append(m.group("name"))
                skipping = line.rstrip() != "}"
                continue
        if line.lstrip().startswith("//"):
            kept.append(line)  # comments keep the placeholders: they describe the template
        else:
            kept.append(line.replace(PLACEHOLDER, binary).replace(CGROUPS_PLACEHOLDER, filter_expr))
    header = [f"// lab: client binary {binary}", f"// lab: filter {filter_expr}"]
    if absent:
        header.append(
            "// lab: uprobes removed because the binary has no such symbol: " + ", ".join(absent)
        )
    text = "\n".join(header + kept) + "\n"
    return RenderedScript(text, tuple(uprobes), tuple(absent))


def script_uprobes(script: str) -> list[str]:
    """The functions a rendered script attaches uprobes to."""
    return [m.group("name") for m in _RENDERED_UPROBE.finditer(script)]


def defined_counters(script: str) -> list[str]:
    """Maps the script fills with ``count()`` or ``sum()``, sorted."""
    return sorted(set(_COUNTER_DEF.findall(script)))


def function_symbols(nm_output: str) -> set[str]:
    """Defined function names in ``nm --defined-only`` output (versions stripped)."""
    names: set[str] = set()
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[-2] in _NM_FUNCTION_TYPES:
            names.add(parts[-1].split("@", 1)[0])
    return names


def check_attach_path(binary: str) -> None:
    """An attach point is ``uprobe:PATH:FUNCTION``: refuse paths bpftrace cannot parse."""
    if not binary or any(c.isspace() for c in binary) or ":" in binary:
        raise CollectorError(
            f"bpftrace cannot attach uprobes to {binary!r}: the path is empty or contains "
            "whitespace or ':', which separate the parts of an attach point."
        )


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
        if (m := _ATTACHING.match(line)) is not None:
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
) -> dict[str, Any]:
    """The ``observed.bpftrace`` record of one invocation.

    ``counters`` are the maps the script defines; one that a complete session did not print
    for this cgroup belongs to probes that attached and never fired for it: an observed 0.
    A counter fed by a uprobe whose symbol the binary lacks is omitted (and its function
    listed in ``absent_symbols``), never reported as 0; so is one the script does not define.
    """
    absent_maps = {UPROBE_COUNTERS[s] for s in absent_symbols if s in UPROBE_COUNTERS}
    summary: dict[str, Any] = {}
    unprinted: list[str] = []
    for name, key in COUNTER_KEYS.items():
        if name in absent_maps or name not in counters:
            continue
        value = trace.counter(name)
        if value is None:
            unprinted.append(name)
        summary[key] = 0 if value is None else value
    summary.update(
        destinations=trace.destinations,
        maps=dict(sorted(trace.maps.items())),
        absent_symbols=sorted(absent_symbols),
        unprinted_maps=unprinted,
        function_entries=dict(sorted(trace.function_entries().items())),
        uring_ops=trace.uring_ops(),
        undecodable=trace.undecodable(),
        attached_probes=session.attached_probes,
        lost_events=session.lost_events,
        # printf lines (destinations, entries) can be lost; the maps never are
        events_complete=session.lost_events == 0,
    )
    return summary


class BpftraceSession(SessionCollector):
    """One ``bpftrace`` per pass running ``probes/client.bt``, filtered to the pass's
    invocation cgroups."""

    name: ClassVar[str] = "bpftrace"

    def __init__(self, *, script: Path = DEFAULT_SCRIPT, ready_timeout_s: float = READY_TIMEOUT_S):
        self.script = script
        self.ready_timeout_s = ready_timeout_s
        self._bg: procs.Background | None = None
        self._ctx: PassContext | None = None
        self._rendered: RenderedScript | None = None

    @classmethod
    def probe(cls) -> ObserverStatus:
        """Every requirement in turn, then a real run of the script with a libc uprobe."""
        path = procs.which("bpftrace")
        if path is None:
            return ObserverStatus(
                False,
                "bpftrace is not installed; install the Debian package 'bpftrace' "
                "(apt-get install bpftrace).",
            )
        detail: dict[str, Any] = {"path": path}
        reason = _static_reason(DEFAULT_SCRIPT)
        if reason is not None:
            return ObserverStatus(False, reason, detail)
        with tempfile.TemporaryDirectory(prefix="lab-bpftrace-probe-") as tmp:
            reason = _attach_test(path, Path(tmp), detail)
        return ObserverStatus(reason is None, reason, detail)

    def _paths(self, ctx: PassContext) -> tuple[Path, Path, Path, Path]:
        return (
            ctx.out_dir / SCRIPT_NAME,
            ctx.out_dir / OUTPUT_NAME,
            ctx.out_dir / STDERR_NAME,
            ctx.out_dir / SYMBOLS_NAME,
        )

    def start(self, ctx: PassContext) -> None:
        self._ctx = ctx
        binary = str(ctx.client_path)
        check_attach_path(binary)
        groups = [w.cgroup_path for w in ctx.windows if w.cgroup_path is not None]
        if len(groups) != len(ctx.windows):
            raise CollectorError("bpftrace needs a cgroup per invocation (the sandbox is off).")
        script, out, err, symbols = self._paths(ctx)
        present = _symbols(binary, symbols, ctx.log)
        template = self.script.read_text(encoding="utf-8")
        self._rendered = render_script(template, binary, present, cgroup_filter(groups))
        script.write_text(self._rendered.text, encoding="utf-8")
        tool = procs.require_tool("bpftrace")
        self._bg = procs.Background(
            [tool, "-o", str(out), str(script)],
            purpose="bpftrace session for one pass (every invocation's cgroup)",
            log=ctx.log,
            tool="bpftrace",
            stderr=err,
            stop_signal=signal.SIGINT,
            grace_s=STOP_GRACE_S,
        )
        self._bg.__enter__()
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            text = out.read_text(errors="replace") if out.exists() else ""
            announced = _ATTACHING.search(text)
            if announced is not None and attached_links(self._bg.pid) >= int(announced.group(1)):
                # the last link may be opened but not yet enabled: a moment for its ioctl
                time.sleep(0.05)
                return
            if not self._bg.alive():
                done = self._bg.stop()
                why = _stderr_excerpt(err) or f"exit status {done.exit_status}"
                raise CollectorError(f"bpftrace could not attach its probes: {why}")
            time.sleep(0.02)
        self._bg.stop()
        raise CollectorError(
            f"bpftrace did not finish attaching within {self.ready_timeout_s:g} s."
        )

    def stop(self) -> dict[int, CollectorOutput]:
        ctx, bg, rendered = self._ctx, self._bg, self._rendered
        if ctx is None or bg is None or rendered is None:
            return {}
        done = bg.stop()
        script, out, err, symbols = self._paths(ctx)
        session_artifacts = [ctx.relative(p) for p in (script, symbols, out, err) if p.exists()]
        text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        session = parse_bpftrace(text)
        error = _failure(done, session, err)
        counters = defined_counters(rendered.text)
        absent = list(rendered.absent_symbols)
        outputs: dict[int, CollectorOutput] = {}
        for window in ctx.windows:
            artifacts = list(session_artifacts)
            trace = session.for_cgroup(window.cgroup_id or -1)
            split = window.out_dir / OUTPUT_NAME
            window.out_dir.mkdir(parents=True, exist_ok=True)
            lines = [*session.session_lines[:2], *trace.lines, *session.session_lines[2:]]
            split.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            artifacts.append(ctx.relative(split))
            if error is not None:
                outputs[window.index] = CollectorOutput(self.name, None, artifacts, error=error)
                continue
            summary = summarize(trace, session, counters, absent)
            summary["cgroup_id"] = window.cgroup_id
            outputs[window.index] = CollectorOutput(self.name, summary, artifacts)
        return outputs


def attached_links(pid: int, proc: Path = Path("/proc")) -> int:
    """How many perf-event links ``pid`` holds: one per attach point once attached.

    bpftrace 0.17 announces "Attaching N probes..." before it attaches, and its probe output
    (the BEGIN probe's marker included) reaches the ``-o`` file only when its perf ring
    buffer wakes it (after a watermark of events) or at exit; so readiness is read from the
    kernel's side instead: N perf-event descriptors open in the bpftrace process."""
    fds = proc / str(pid) / "fd"
    count = 0
    try:
        entries = list(fds.iterdir())
    except OSError:
        return 0
    for entry in entries:
        try:
            if os.readlink(entry) == "anon_inode:[perf_event]":
                count += 1
        except OSError:
            continue
    return count


def _stderr_excerpt(path: Path, limit: int = procs.STDERR_EXCERPT) -> str:
    """The end of bpftrace's stderr without its harmless RLIMIT_MEMLOCK complaint (printed
    on kernels that account BPF memory without that limit)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if "RLIMIT_MEMLOCK" not in ln and ln.strip()]
    joined = " ".join(ln.strip() for ln in lines)
    return joined if len(joined) <= limit else "…" + joined[-limit:]


def _failure(done: procs.Completed, parsed: BpftraceTrace, stderr: Path) -> str | None:
    """One sentence when the session's output cannot be trusted as complete, else None."""
    if done.timed_out:
        return (
            f"bpftrace did not stop within {STOP_GRACE_S:g} s of being interrupted; "
            f"{OUTPUT_NAME} is incomplete."
        )
    if done.killed_by_signal is not None:
        return f"bpftrace was killed by signal {done.killed_by_signal}; {OUTPUT_NAME} is truncated."
    if done.exit_status != 0:
        why = _stderr_excerpt(stderr)
        return f"bpftrace exited with status {done.exit_status}{': ' + why if why else ''}"
    if not parsed.attached:
        return f"bpftrace never reported its probes attached ({OUTPUT_NAME} lacks the marker)."
    if not parsed.complete:
        return f"{OUTPUT_NAME} ends before the END probe's marker; the trace is truncated."
    return None


def _symbols(binary: str, keep: Path, log: procs.CommandLog | None) -> set[str]:
    """Function symbols of ``binary`` (symbol table, else dynamic symbols), via nm; the
    listing is kept. A binary nm cannot read gets no uprobes (all reported absent)."""
    nm = procs.which("nm")
    if nm is None:
        raise CollectorError(
            "nm is not installed; install the Debian package 'binutils' (apt-get install "
            "binutils): the bpftrace collector needs it to see which functions the client has."
        )
    names: set[str] = set()
    for flags in (["--defined-only"], ["--defined-only", "--dynamic"]):
        done = procs.run(
            [nm, *flags, binary],
            purpose="client symbols for bpftrace uprobes",
            log=log,
            stdout=keep,
            stderr=keep.with_suffix(".err"),
            timeout=60,
            accept=None,
        )
        names = function_symbols(keep.read_text(errors="replace"))
        if done.exit_status == 0 and names:
            break
    err = keep.with_suffix(".err")
    if err.exists() and err.stat().st_size == 0:
        err.unlink()
    return names


def _capabilities() -> int:
    return effective_mask()


def _tracefs() -> Path | None:
    for candidate in TRACEFS_CANDIDATES:
        if (candidate / "events").is_dir():
            return candidate
    return None


def _static_reason(script: Path) -> str | None:
    """The first missing requirement that can be seen without running bpftrace."""
    caps = _capabilities()
    has_bpf = caps >> CAP_BPF & 1 and caps >> CAP_PERFMON & 1
    if os.geteuid() != 0 and not (has_bpf or caps >> CAP_SYS_ADMIN & 1):
        return (
            "bpftrace needs root (or CAP_BPF with CAP_PERFMON); run the lab as root, "
            "e.g. sudo invoke lab.run."
        )
    if not BTF.exists():
        return (
            f"the kernel exposes no BTF ({BTF} is missing), which the probes need to read "
            "socket addresses; use a kernel built with CONFIG_DEBUG_INFO_BTF=y."
        )
    tracefs = _tracefs()
    if tracefs is None:
        return (
            "tracefs is not mounted (no /sys/kernel/tracing/events); mount it with "
            "'mount -t tracefs nodev /sys/kernel/tracing'."
        )
    if not UPROBE_PMU.exists():
        return (
            f"the kernel does not support uprobes ({UPROBE_PMU} is missing); use a kernel "
            "built with CONFIG_UPROBE_EVENTS=y."
        )
    try:
        wanted = _TRACEPOINT.findall(script.read_text(encoding="utf-8"))
    except OSError as exc:
        return f"the probe script {script} cannot be read ({exc.strerror})."
    for category, event in wanted:
        if not (tracefs / "events" / category / event).exists():
            return (
                f"the kernel lacks tracepoint {category}:{event} ({tracefs}/events/{category}/"
                f"{event} is missing); syscall tracepoints need CONFIG_FTRACE_SYSCALLS=y."
            )
    if procs.which("nm") is None:
        return (
            "nm is not installed; install the Debian package 'binutils' (apt-get install binutils)."
        )
    return None


def _attach_test(tool: str, tmp: Path, detail: dict[str, Any]) -> str | None:
    """Run the real script (no client uprobes) plus a uprobe on libc's exit under
    ``-c true``: proves that every tracepoint, the BTF casts and uprobes attach and fire."""
    true = procs.which("true") or "/bin/true"
    rendered = render_script(DEFAULT_SCRIPT.read_text(encoding="utf-8"), true, (), "pid == cpid")
    script = tmp / "probe.bt"
    # after the rendered text: its #define lines must come before any probe
    script.write_text(
        rendered.text + "\nuprobe:libc:exit /pid == cpid/ { @probe_uprobe = count(); }\n"
    )
    out = tmp / "out.txt"
    done = procs.run(
        [tool, "-o", str(out), str(script), "-c", true],
        purpose="bpftrace capability probe",
        stdout=tmp / "stdout",
        stderr=tmp / "stderr",
        timeout=60,
        accept=None,
    )
    version = tmp / "version"
    procs.run([tool, "--version"], purpose="bpftrace version", stdout=version, accept=None)
    detail["version"] = version.read_text(errors="replace").strip() or None
    parsed = parse_bpftrace(out.read_text(errors="replace") if out.exists() else "")
    if done.exit_status != 0 or not parsed.complete:
        excerpt = _stderr_excerpt(tmp / "stderr") or f"exit status {done.exit_status}"
        return f"bpftrace could not attach the lab's probes here ({excerpt})."
    fired = [value for _, _, name, value, _ in parsed.map_rows if name == "@probe_uprobe"]
    if fired != ["1"]:
        return (
            "bpftrace attached a uprobe on libc's exit() but it never fired; "
            "uprobes do not work here."
        )
    detail["attached_probes"] = parsed.attached_probes
    return None
