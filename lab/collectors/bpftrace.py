"""The bpftrace collector: uprobes on the client's own functions, tracepoints on its
connects, reads, sends and context switches, counted in the kernel.

bpftrace runs the client as its child (``-c``; every probe is filtered with ``cpid``) and
writes what the probes print to ``bpftrace.txt`` (``-o``). The script is
``probes/client.bt`` with ``__BINARY__`` replaced by the client's path and with the uprobe
block of every function the binary lacks removed (bpftrace refuses to start when a uprobe
cannot attach); the script actually run is kept as ``bpftrace.bt`` and the symbol table it
was checked against as ``bpftrace.symbols.txt``. bpftrace's exit status is its own, so the
client's comes from the ``exit_group`` line the script prints.

    collector = BpftraceCollector()
    status = BpftraceCollector.probe()       # root, BTF, tracefs, uprobes, a real attach
    argv = collector.wrap(["/abs/backup-client", "--source", src, "--receiver", rx], ctx)
    done = lab.host.procs.run(argv, purpose="client", log=ctx.log, accept=None, ...)
    out = collector.collect(ctx, done)       # out.summary["hash_calls"], out.client_exit_status

    parsed = parse_bpftrace(Path("bpftrace.txt").read_text())
    parsed.maps["@hash_calls"]               # "256", verbatim
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lab.collectors.base import CollectorOutput, InvocationContext, ProcessCollector
from lab.errors import CollectorError
from lab.host import procs
from lab.host.capabilities import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, effective_mask
from lab.host.procs import Completed
from lab.model import ObserverStatus

PROBES_DIR = Path(__file__).resolve().parents[2] / "probes"
DEFAULT_SCRIPT = PROBES_DIR / "client.bt"
SCRIPT_NAME = "bpftrace.bt"
OUTPUT_NAME = "bpftrace.txt"
SYMBOLS_NAME = "bpftrace.symbols.txt"
PLACEHOLDER = "__BINARY__"
#: printed by the script's END probe; bpftrace prints the final maps right after it
END_MARKER = "lab: end of trace"

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

BTF = Path("/sys/kernel/btf/vmlinux")
TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
UPROBE_PMU = Path("/sys/bus/event_source/devices/uprobe")

_UPROBE_LINE = re.compile(rf"^uprobe:{PLACEHOLDER}:(?P<name>\w+)")
_RENDERED_UPROBE = re.compile(r"^uprobe:[^:\s]+:(?P<name>\w+)", re.MULTILINE)
_COUNTER_DEF = re.compile(r"(@\w+)\s*=\s*(?:count|sum)\(")
_TRACEPOINT = re.compile(r"^tracepoint:(\w+):(\w+)", re.MULTILINE)
_ATTACHING = re.compile(r"^Attaching (\d+) probes?\.\.\.$")
_LOST = re.compile(r"Lost (\d+) events")
_EVENT = re.compile(r"^(?P<nsecs>\d+) pid=(?P<pid>\d+) (?P<kind>\w+)(?P<rest>.*)$")
_MAP = re.compile(r"^(?P<name>@\w+(?:\[.*\])?): (?P<value>.*)$")
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


def render_script(template: str, binary: str, present_symbols: Collection[str]) -> RenderedScript:
    """Substitute the binary's path and drop the uprobe block (its first line to the next
    line that is exactly ``}``) of every function ``present_symbols`` lacks."""
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
        # comments keep the placeholder: they describe the template
        kept.append(line if line.lstrip().startswith("//") else line.replace(PLACEHOLDER, binary))
    header = [f"// lab: client binary {binary}"]
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


def check_command_word(word: str, what: str) -> None:
    """bpftrace 0.17 splits ``-c`` on single spaces and has no quoting: refuse words it
    would split or drop, and (for the binary) characters an attach point cannot hold."""
    if word == "" or any(c.isspace() for c in word):
        raise CollectorError(
            f"bpftrace cannot run the client: {what} {word!r} is empty or contains "
            "whitespace, which bpftrace -c splits on; use paths without spaces "
            "(e.g. move the run directory)."
        )


@dataclass
class BpftraceEvent:
    """One line printed by a probe: ``<nsecs> pid=<pid> <kind> key=value ...``."""

    nsecs: int
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
    return BpftraceEvent(int(m.group("nsecs")), int(m.group("pid")), m.group("kind"), fields)


def _destination(event: BpftraceEvent) -> str | None:
    family = event.fields.get("family")
    if family == "inet":
        return f"{event.fields.get('addr')}:{event.fields.get('port')}"
    if family == "inet6":
        return f"[{event.fields.get('addr')}]:{event.fields.get('port')}"
    if family == "unix":
        # an abstract socket's name starts with NUL, so bpftrace prints it as ""
        path = event.fields.get("path", "")
        return f"unix:{path}" if path else "unix:@"
    if family == "1":
        return "unix:?"  # sendmmsg to a unix socket: the script does not read its path
    return None  # AF_UNSPEC (UDP disconnect), netlink ...: not a network destination


@dataclass
class BpftraceSummary:
    """What ``bpftrace.txt`` says."""

    #: final map values, verbatim: {"@hash_calls": "256", ...}
    maps: dict[str, str] = field(default_factory=dict)
    events: list[BpftraceEvent] = field(default_factory=list)
    attached_probes: int | None = None
    lost_events: int = 0
    #: the END probe ran (its marker line is present), so the maps after it are final
    complete: bool = False
    unparsed_lines: int = 0

    @property
    def exit_status(self) -> int | None:
        """The status the client passed to exit_group(2) (as a wait status: low 8 bits)."""
        codes = [e for e in self.events if e.kind == "exit_group" and "status" in e.fields]
        if not codes:
            return None
        return int(codes[-1].fields["status"]) & 0xFF

    @property
    def destinations(self) -> list[str]:
        found = {
            d
            for e in self.events
            if e.kind in ("connect", "sendto", "sendmsg", "sendmmsg")
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

    def to_summary(self, counters: Sequence[str], absent_symbols: Sequence[str]) -> dict[str, Any]:
        """The ``observed.bpftrace`` record.

        ``counters`` are the maps the script defines; one that a complete trace did not
        print belongs to a probe that attached and never fired: an observed 0. A counter
        fed by a uprobe whose symbol the binary lacks is omitted (and its function listed
        in ``absent_symbols``), never reported as 0; so is one the script does not define.
        """
        absent_maps = {UPROBE_COUNTERS[s] for s in absent_symbols if s in UPROBE_COUNTERS}
        summary: dict[str, Any] = {}
        unprinted: list[str] = []
        for name, key in COUNTER_KEYS.items():
            value = self.counter(name)
            if name in absent_maps or name not in counters:
                continue
            if value is None:
                unprinted.append(name)
            summary[key] = 0 if value is None else value
        summary.update(
            destinations=self.destinations,
            maps=dict(sorted(self.maps.items())),
            absent_symbols=sorted(absent_symbols),
            unprinted_maps=unprinted,
            function_entries=dict(sorted(self.function_entries().items())),
            exit_status=self.exit_status,
            attached_probes=self.attached_probes,
            lost_events=self.lost_events,
            # printf lines (destinations, entries) can be lost; the maps never are
            events_complete=self.lost_events == 0,
        )
        return summary


def parse_bpftrace(text: str) -> BpftraceSummary:
    """Parse bpftrace's ``-o`` output: the "Attaching" line, probe lines, "Lost N events"
    warnings, the END marker and the map values printed after it."""
    parsed = BpftraceSummary()
    for line in text.splitlines():
        line = line.rstrip()
        if not line:
            continue
        if (m := _ATTACHING.match(line)) is not None:
            parsed.attached_probes = int(m.group(1))
        elif (m := _LOST.search(line)) is not None:
            parsed.lost_events += int(m.group(1))
        elif line == END_MARKER:
            parsed.complete = True
        elif parsed.complete and (m := _MAP.match(line)) is not None:
            parsed.maps[m.group("name")] = m.group("value")
        elif (event := _event(line)) is not None:
            parsed.events.append(event)
        else:
            parsed.unparsed_lines += 1
    return parsed


class BpftraceCollector(ProcessCollector):
    """Runs the client under ``bpftrace -c`` with ``probes/client.bt``."""

    name: ClassVar[str] = "bpftrace"
    accepted_status: ClassVar[tuple[int, ...] | None] = (0,)
    passes_exit_status: ClassVar[bool] = False

    def __init__(self, *, script: Path = DEFAULT_SCRIPT) -> None:
        self.script = script

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

    def wrap(self, client_argv: list[str], ctx: InvocationContext) -> list[str]:
        binary = str(ctx.client_path.resolve())
        check_command_word(binary, "the client path")
        if ":" in binary:
            raise CollectorError(
                f"bpftrace cannot attach uprobes to {binary!r}: the path contains ':', which "
                "separates the parts of an attach point; use a path without ':'."
            )
        for word in client_argv:
            check_command_word(word, "the client argument")
        out = ctx.out_dir / OUTPUT_NAME
        check_command_word(str(out), "the output path")
        symbols = ctx.out_dir / SYMBOLS_NAME
        present = _symbols(binary, symbols, ctx)
        template = self.script.read_text(encoding="utf-8")
        rendered = render_script(template, binary, present)
        script = ctx.out_dir / SCRIPT_NAME
        script.write_text(rendered.text, encoding="utf-8")
        tool = procs.which("bpftrace") or "bpftrace"
        return [tool, "-o", str(out), str(script), "-c", " ".join(client_argv)]

    def collect(self, ctx: InvocationContext, completed: Completed) -> CollectorOutput:
        script = ctx.out_dir / SCRIPT_NAME
        out = ctx.out_dir / OUTPUT_NAME
        kept = [p for p in (script, ctx.out_dir / SYMBOLS_NAME, out) if p.exists()]
        artifacts = [ctx.relative(p) for p in kept]
        if not script.exists():
            return CollectorOutput(
                self.name, None, artifacts, error=f"the probe script {SCRIPT_NAME} was not written."
            )
        text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        parsed = parse_bpftrace(text)
        client_status = parsed.exit_status
        error = _failure(completed, parsed, ctx.timeout_s)
        if error is not None:
            return CollectorOutput(
                self.name, None, artifacts, error=error, client_exit_status=client_status
            )
        rendered = script.read_text(encoding="utf-8")
        attached = script_uprobes(rendered)
        absent = [f for f in template_uprobes(self.script.read_text()) if f not in attached]
        summary = parsed.to_summary(defined_counters(rendered), absent)
        return CollectorOutput(self.name, summary, artifacts, client_exit_status=client_status)


def stderr_excerpt(completed: Completed, limit: int = procs.STDERR_EXCERPT) -> str:
    """The end of the wrapped command's stderr without bpftrace's harmless RLIMIT_MEMLOCK
    complaint (printed on kernels that account BPF memory without that limit)."""
    if not completed.stderr_path:
        return ""
    try:
        text = Path(completed.stderr_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if "RLIMIT_MEMLOCK" not in ln and ln.strip()]
    joined = " ".join(ln.strip() for ln in lines)
    return joined if len(joined) <= limit else "…" + joined[-limit:]


def _failure(completed: Completed, parsed: BpftraceSummary, timeout_s: float) -> str | None:
    """One sentence when the trace cannot be trusted as complete, else None."""
    stderr = stderr_excerpt(completed)
    if completed.timed_out:
        return (
            f"bpftrace and the client did not finish within {timeout_s:g} s; "
            f"{OUTPUT_NAME} is incomplete."
        )
    if completed.killed_by_signal is not None:
        return (
            f"bpftrace was killed by signal {completed.killed_by_signal}; "
            f"{OUTPUT_NAME} is truncated."
        )
    if completed.exit_status != 0:
        why = f": {stderr}" if stderr else ""
        return f"bpftrace exited with status {completed.exit_status}{why}"
    if parsed.attached_probes is None:
        return f"bpftrace attached no probes ({OUTPUT_NAME} lacks 'Attaching N probes')."
    if not parsed.complete:
        return f"{OUTPUT_NAME} ends before the END probe's marker; the trace is truncated."
    return None


def _symbols(binary: str, keep: Path, ctx: InvocationContext) -> set[str]:
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
            log=ctx.log,
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
    rendered = render_script(DEFAULT_SCRIPT.read_text(encoding="utf-8"), true, ())
    script = tmp / "probe.bt"
    script.write_text(
        "uprobe:libc:exit /pid == cpid/ { @probe_uprobe = count(); }\n" + rendered.text
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
        excerpt = stderr_excerpt(done) or f"exit status {done.exit_status}"
        return f"bpftrace could not attach the lab's probes here ({excerpt})."
    if parsed.counter("@probe_uprobe") != 1:
        return (
            "bpftrace attached a uprobe on libc's exit() but it never fired; "
            "uprobes do not work here."
        )
    detail["attached_probes"] = parsed.attached_probes
    return None
