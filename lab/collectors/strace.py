"""The strace collector: every system call of the client and of anything it starts.

In the sandbox, strace attaches to the jail's main process while it waits at its gate, just
before the client (``strace -f -p PID``: ``lab.sandbox.gate``), and follows it through its
``execve`` of the client and every process that starts; without a sandbox it runs the
client as its child. Either way ``-f`` follows forks and threads, and it writes one line
per call to ``strace.txt`` in the invocation directory (its own messages, such as when it
attached, to ``strace.stderr.txt``), with an epoch timestamp (``-ttt``),
the call's duration (``-T``), descriptors decoded to paths and socket endpoints (``-yy``)
and at most 16 bytes of each buffer (``-s 16``: enough to recognise ``HAVE``/``PUT``
without copying the payload into the trace). Run as the client's parent, strace passes
the client's exit status (or its fatal signal) through; the sandbox reports it either way.

    collector = StraceCollector()
    status = StraceCollector.probe()          # ObserverStatus(available=True, ...)
    attacher = collector.attacher(ctx)        # in the sandbox, at the gate (lab.sandbox.gate):
                                              # attacher.start(pid), then attacher.ready(pid)
    argv = collector.wrap(["/abs/backup-client", "--source", src, "--receiver", rx], ctx)
    done = lab.host.procs.run(argv, purpose="client", log=ctx.log, accept=None, ...)
    out = collector.collect(ctx, done)        # out.summary.source_bytes_read ...

The trace is parsed by ``lab.collectors.strace_parse``:

    summary = parse_strace(Path("strace.txt").read_text(), "/run/x/source.bin")
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from lab.collectors.base import CollectorOutput, InvocationContext, ProcessCollector
from lab.collectors.strace_parse import parse_strace
from lab.errors import CollectorError
from lab.host import procs
from lab.host.procs import Completed
from lab.model import ObserverStatus
from lab.sandbox import gate
from lab.sandbox.jail import GATED_EXECS, JAIL_EXECS

TRACE_NAME = "strace.txt"
#: strace's own messages when it attached at the gate (it attached, it detached, errors)
STDERR_NAME = "strace.stderr.txt"
#: ``-s``: bytes of each string argument strace prints (payload stays out of the trace)
STRING_LIMIT = 16
YAMA_PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")


class StraceCollector(ProcessCollector):
    """Runs the client under ``strace -f`` and parses the trace it leaves."""

    name: ClassVar[str] = "strace"
    accepted_status: ClassVar[tuple[int, ...] | None] = None

    @classmethod
    def probe(cls) -> ObserverStatus:
        """strace installed, ptrace allowed: proven by tracing ``true`` for real, and by
        attaching to a process that is not strace's child (as at the sandbox's gate, where
        Yama's ``ptrace_scope`` 1 wants CAP_SYS_PTRACE)."""
        path = procs.which("strace")
        if path is None:
            return ObserverStatus(False, procs.missing_tool("strace"))
        detail: dict[str, Any] = {"path": path}
        scope = _ptrace_scope()
        if scope is not None:
            detail["yama_ptrace_scope"] = scope
        if scope == 3:
            return ObserverStatus(
                False,
                f"ptrace is disabled by {YAMA_PTRACE_SCOPE} = 3 until the next reboot; "
                "strace cannot trace the client on this host.",
                detail,
            )
        true = procs.which("true") or "/bin/true"
        with tempfile.TemporaryDirectory(prefix="lab-strace-probe-") as tmp:
            err = Path(tmp) / "stderr"
            out = Path(tmp) / "stdout"
            procs.run([path, "-V"], purpose="strace version", stdout=out, timeout=30, accept=None)
            lines = out.read_text(errors="replace").splitlines()
            detail["version"] = lines[0] if lines else None
            done = procs.run(
                [path, "-f", "--pidns-translation", "-o", "/dev/null", true],
                purpose="strace capability probe",
                stderr=err,
                timeout=30,
                accept=None,
            )
            why = None
            if done.exit_status != 0:
                why = done.stderr_excerpt() or f"exit status {done.exit_status}"
            else:
                why = _attach_refused(path, Path(tmp))
            if why is not None:
                return ObserverStatus(
                    False,
                    f"strace cannot trace a process here ({why}); run as root or grant "
                    "CAP_SYS_PTRACE (in Docker: --cap-add SYS_PTRACE) and check "
                    f"{YAMA_PTRACE_SCOPE}.",
                    detail,
                )
        return ObserverStatus(True, None, detail)

    def wrap(self, client_argv: list[str], ctx: InvocationContext) -> list[str]:
        return [*self._options(ctx), "--", *client_argv]

    def attacher(self, ctx: InvocationContext) -> gate.Attacher:
        messages = ctx.out_dir / STDERR_NAME

        def start(pid: int) -> procs.Background:
            return procs.Background(
                [*self._options(ctx), "-p", str(pid)],
                purpose=f"strace attached at the sandbox's gate (invocation {ctx.invocation})",
                log=ctx.log,
                tool="strace",
                stderr=messages,
            ).start()

        return gate.Attacher(start=start, ready=lambda pid: attached(messages, pid))

    def _options(self, ctx: InvocationContext) -> list[str]:
        trace = ctx.out_dir / TRACE_NAME
        return [
            procs.which("strace") or "strace",
            "-f",
            # the client runs in a PID namespace of its own: clone(2) returns a pid of that
            # namespace, and the parser follows the family by the tracer's (strace >= 5.9)
            "--pidns-translation",
            "-ttt",
            "-T",
            "-yy",
            "-s",
            str(STRING_LIMIT),
            "-o",
            str(trace),
        ]

    def collect(self, ctx: InvocationContext, completed: Completed) -> CollectorOutput:
        trace = ctx.out_dir / TRACE_NAME
        if not trace.exists():
            why = completed.stderr_excerpt() or f"exit status {completed.exit_status}"
            return CollectorOutput(
                self.name, None, error=f"strace wrote no trace {TRACE_NAME} ({why})."
            )
        artifacts = [ctx.relative(trace)]
        messages = ctx.out_dir / STDERR_NAME
        if messages.exists():
            artifacts.append(ctx.relative(messages))
        if completed.timed_out:
            return CollectorOutput(
                self.name,
                None,
                artifacts,
                error=f"strace and the client did not finish within {ctx.timeout_s:g} s; "
                f"the trace {TRACE_NAME} is incomplete.",
            )
        text = trace.read_text(encoding="utf-8", errors="replace")
        tally = parse_strace(
            text,
            str(ctx.source_path.resolve()),
            client_pid=ctx.client_pid,
            execs_before_client=JAIL_EXECS if ctx.client_pid is not None else 0,
            attached_execs=GATED_EXECS,
        )
        if not tally.client_found:
            return CollectorOutput(
                self.name,
                None,
                artifacts,
                error=f"{TRACE_NAME} holds no execve of the client after the sandbox's steps "
                "(the tracer missed the start of the client); its figures are not observed, "
                "never counted as zero.",
            )
        if not tally.complete:
            why = completed.stderr_excerpt()
            return CollectorOutput(
                self.name,
                None,
                artifacts,
                error=f"{TRACE_NAME} ends before the client's exit is recorded (strace "
                f"failed or was killed{': ' + why if why else ''}); the trace is truncated.",
            )
        return CollectorOutput(self.name, tally.summary(), artifacts)


#: the calls a file-system witness needs: every call that names a file (``%file``), every
#: descriptor call (``%desc``: the decoded results) and the process calls (``%process``:
#: who created whom, and which program each process runs)
FILE_TRACE_CLASSES = "%file,%desc,%process"


def file_trace_argv(trace: Path, argv: list[str]) -> list[str]:
    """``argv`` run under ``strace -f`` keeping only the file, descriptor and process calls
    (a workload's file-system witness, read by ``lab.collectors.strace_files``), each
    descriptor decoded to the kernel's path (``-yy``). ``--seccomp-bpf`` stops the tracee
    only at those calls, so the rest runs at full speed."""
    return [
        procs.which("strace") or "strace",
        "-f",
        "--seccomp-bpf",
        "-ttt",
        "-T",
        "-yy",
        "-s",
        str(STRING_LIMIT),
        "-e",
        f"trace={FILE_TRACE_CLASSES}",
        "-o",
        str(trace),
        "--",
        *argv,
    ]


def attached(messages: Path, pid: int) -> bool:
    """Whether strace has said, in its messages file, that it attached to ``pid``: it says
    so after PTRACE_SEIZE and PTRACE_INTERRUPT both (``lab.sandbox.gate.Attacher``)."""
    try:
        text = messages.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return f"Process {pid} attached" in text


def _attach_refused(strace: str, tmp: Path) -> str | None:
    """Why ``strace -p`` could not attach to a sibling process here (None: it did)."""
    sleep = procs.which("sleep") or "/bin/sleep"
    messages = tmp / "attach.stderr"
    probe = gate.Attacher(
        start=lambda pid: procs.Background(
            [strace, "-o", "/dev/null", "-p", str(pid)],
            purpose="strace attach probe",
            stderr=messages,
        ).start(),
        ready=lambda pid: attached(messages, pid),
    )
    with procs.Background([sleep, "30"], purpose="strace attach probe's target") as target:
        tracer = probe.start(target.pid)
        try:
            gate.wait_attached(target.pid, probe, tracer, time.monotonic() + 10.0)
        except CollectorError as exc:
            tracer.stop()
            return str(exc)
        except BaseException:
            tracer.stop()
            raise
    tracer.wait(10.0)  # the target is gone: strace ends with it
    return None


def _ptrace_scope() -> int | None:
    try:
        return int(YAMA_PTRACE_SCOPE.read_text().strip())
    except (OSError, ValueError):
        return None
