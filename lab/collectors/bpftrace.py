"""The bpftrace collector: uprobes on the client's own functions, tracepoints on its
connects, reads, sends, context switches, io_uring submissions, TCP connection attempts and
datagrams, counted in the kernel. One session per pass, or one for several passes
(``lab.run.phases``: every bpftrace pass of a sandboxed run, whose cgroups are made before
it starts and whose boxes all run one client inode).

bpftrace attaches once, before the first invocation it observes, and every probe is filtered
to the cgroups of those invocations (``lab.sandbox``): every thread, child, exec'd
program and daemon of a client is seen, none of the instrument is, and every map is keyed
by the cgroup id, which names the invocation. The script is ``probes/client.bt`` with
``__BINARY__`` replaced by the client's path, ``__CGROUPS__`` by the cgroup filter, and the
uprobe block of every function the binary lacks removed (bpftrace refuses to start when a
uprobe cannot attach; see ``lab.collectors.bpftrace_script``). Kept per session (in the
pass's directory, or ``sessions/bpftrace-<N>/`` when shared): the script run
(``bpftrace.bt``), the symbol table it was checked against (``bpftrace.symbols.txt``) and the
whole output (``bpftrace.txt``); per invocation: the lines of its cgroup, verbatim, in
``inv<N>/bpftrace.txt``. The output is parsed and summarised by
``lab.collectors.bpftrace_parse``.

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
import platform
import re
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from lab.collectors.base import CollectorOutput, SessionCollector, SessionContext, Window
from lab.collectors.bpftrace_parse import ATTACHING, BpftraceTrace, parse_bpftrace, summarize
from lab.collectors.bpftrace_script import (
    DEFAULT_SCRIPT,
    RenderedScript,
    cgroup_filter,
    check_attach_path,
    defined_counters,
    function_symbols,
    render_script,
)
from lab.errors import CollectorError
from lab.host import procs
from lab.host.capabilities import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, effective_mask
from lab.host.probecache import sysctl_bytes
from lab.model import ObserverStatus
from lab.sandbox.jail import jail_programs

SCRIPT_NAME = "bpftrace.bt"
OUTPUT_NAME = "bpftrace.txt"
STDERR_NAME = "bpftrace.stderr.txt"
SYMBOLS_NAME = "bpftrace.symbols.txt"
#: how long bpftrace may take to compile and attach (about 3 s on the lab's machines)
READY_TIMEOUT_S = 60.0
#: how long it may take to print its maps once interrupted
STOP_GRACE_S = 30.0


BTF = Path("/sys/kernel/btf/vmlinux")
TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
UPROBE_PMU = Path("/sys/bus/event_source/devices/uprobe")

_TRACEPOINT = re.compile(r"tracepoint:(\w+):(\w+)")


class BpftraceSession(SessionCollector):
    """One ``bpftrace`` per pass running ``probes/client.bt``, filtered to the pass's
    invocation cgroups."""

    name: ClassVar[str] = "bpftrace"

    def __init__(
        self,
        *,
        script: Path = DEFAULT_SCRIPT,
        ready_timeout_s: float = READY_TIMEOUT_S,
        scope: str = "one pass",
    ):
        self.script = script
        #: what the session observes, as the command log names it
        self.scope = scope
        self.ready_timeout_s = ready_timeout_s
        self._bg: procs.Background | None = None
        self._ctx: SessionContext | None = None
        self._rendered: RenderedScript | None = None
        #: (dev_t, inode) of the files whose exec in a client's cgroup the uprobes cover;
        #: None when the script has no exec probe (nothing to compare with)
        self._watched: set[tuple[int, int]] | None = None

    @classmethod
    def probe_inputs(cls) -> list[bytes]:
        """What the probe's outcome depends on besides the kernel, the binary and the
        privileges (``lab.host.probecache``): the script it attaches."""
        return [DEFAULT_SCRIPT.read_bytes(), *sysctl_bytes()]

    @classmethod
    def probe(cls) -> ObserverStatus:
        """Every requirement in turn, then a real run of the script with a libc uprobe."""
        path = procs.which("bpftrace")
        if path is None:
            return ObserverStatus(False, procs.missing_tool("bpftrace"))
        detail: dict[str, Any] = {"path": path}
        reason = _static_reason(DEFAULT_SCRIPT)
        if reason is not None:
            return ObserverStatus(False, reason, detail)
        with tempfile.TemporaryDirectory(prefix="lab-bpftrace-probe-") as tmp:
            reason = _attach_test(path, Path(tmp), detail)
        return ObserverStatus(reason is None, reason, detail)

    def _paths(self, ctx: SessionContext) -> tuple[Path, Path, Path, Path]:
        return (
            ctx.out_dir / SCRIPT_NAME,
            ctx.out_dir / OUTPUT_NAME,
            ctx.out_dir / STDERR_NAME,
            ctx.out_dir / SYMBOLS_NAME,
        )

    def start(self, ctx: SessionContext) -> None:
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
        # the files whose exec is expected in a client's cgroup: the one the uprobes are
        # attached to (every pass's box links it) and the jail's own steps
        self._watched = None
        if "sched_process_exec" in self._rendered.text:
            self._watched = {
                identity
                for path in (binary, *jail_programs())
                if (identity := kernel_identity(path)) is not None
            }
        script.write_text(self._rendered.text, encoding="utf-8")
        tool = procs.require_tool("bpftrace")
        self._bg = procs.Background(
            [tool, "-o", str(out), str(script)],
            purpose=f"bpftrace session for {self.scope} (every invocation's cgroup)",
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
            announced = ATTACHING.search(text)
            if announced is not None and attached_links(self._bg.pid) >= int(announced.group(1)):
                # the last link may be opened but not yet enabled: a moment for its ioctl
                time.sleep(0.05)
                return
            if not self._bg.alive():
                done = self._bg.stop()
                ended = (
                    f"killed by signal {done.killed_by_signal}"
                    if done.killed_by_signal is not None
                    else f"exit status {done.exit_status}"
                )
                why = _stderr_excerpt(err) or ended
                raise CollectorError(f"bpftrace could not attach its probes: {why}")
            time.sleep(0.02)
        self._bg.stop()
        raise CollectorError(
            f"bpftrace did not finish attaching within {self.ready_timeout_s:g} s."
        )

    def stop(self) -> dict[int, CollectorOutput]:
        """Detach and split: one output per invocation index of the pass."""
        return {window.index: out for window, out in self._finish()}

    def stop_by_cgroup(self) -> dict[int, CollectorOutput]:
        """Detach and split, for a session shared by several passes (whose invocation
        indexes repeat): one output per invocation cgroup id."""
        return {window.cgroup_id or -1: out for window, out in self._finish()}

    def _finish(self) -> list[tuple[Window, CollectorOutput]]:
        ctx, bg, rendered = self._ctx, self._bg, self._rendered
        if ctx is None or bg is None or rendered is None:
            return []
        done = bg.stop()
        script, out, err, symbols = self._paths(ctx)
        session_artifacts = [ctx.relative(p) for p in (script, symbols, out, err) if p.exists()]
        text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        session = parse_bpftrace(text)
        error = _failure(done, session, err)
        counters = defined_counters(rendered.text)
        absent = list(rendered.absent_symbols)
        outputs: list[tuple[Window, CollectorOutput]] = []
        for window in ctx.windows:
            artifacts = list(session_artifacts)
            trace = session.for_cgroup(window.cgroup_id or -1)
            split = window.out_dir / OUTPUT_NAME
            window.out_dir.mkdir(parents=True, exist_ok=True)
            lines = [*session.session_lines[:2], *trace.lines, *session.session_lines[2:]]
            split.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            artifacts.append(ctx.relative(split))
            if error is not None:
                outputs.append((window, CollectorOutput(self.name, None, artifacts, error=error)))
                continue
            summary = summarize(
                trace, session, counters, absent, window.cgroup_id, watched=self._watched
            )
            outputs.append((window, CollectorOutput(self.name, summary, artifacts)))
        return outputs


def kernel_identity(path: str) -> tuple[int, int] | None:
    """(dev_t as the kernel encodes it, inode) of ``path``, as the exec probe prints them."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.major(st.st_dev) << 20) | os.minor(st.st_dev), st.st_ino


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
            procs.missing_tool("nm").rstrip(".")
            + ": the bpftrace collector needs it to see which functions the client has."
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
    if platform.machine() != "x86_64":
        return (
            f"the probe script decodes x86_64 system calls by number ({script.name}); this "
            f"machine is {platform.machine()}: run the lab on x86_64."
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
        return procs.missing_tool("nm")
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
