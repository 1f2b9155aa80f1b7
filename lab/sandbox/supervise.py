"""Run one client invocation in its sandbox and supervise it to the end: its main process's
exit (or the time-out, which kills the whole cgroup), every process it left behind (recorded,
given a short grace under observation, then killed with ``cgroup.kill``), its capped output,
and the wrapper (a tracer, or nothing) finishing after it.

    outcome = supervise(
        argv_for=lambda status_fd: tracer_prefix + jail_argv(spec, client, status_fd=status_fd),
        group=invocation_group, timeout_s=60, linger_grace_s=1.0,
        stdout=inv_dir / "client.stdout", stderr=inv_dir / "client.stderr",
        purpose="client invocation 1 (baseline, pass none)", log=log)
    outcome.exit_status, outcome.timed_out, outcome.lingering, outcome.wrapper

With a ``gate`` (``lab.sandbox.gate``) and ``attach``, the tracer is not a wrapper: once the
jail's filter step waits at the gate, ``attach.start(main_pid)`` starts it on that process,
the gate opens once ``attach.ready(main_pid)`` (strace: it said it attached), and
``outcome.wrapper`` is the tracer's record.

The main process is the first child of the init bwrap reports on ``--json-status-fd``
(``child-pid``: pid 1 of the sandbox's PID namespace); its exit is the ``exit-code`` line
bwrap writes on the same descriptor as soon as it exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import CollectorError
from lab.host import procs
from lab.model.sandbox import CgroupStats, ProcessInfo
from lab.sandbox.boxfs import DiskUse
from lab.sandbox.cgroup import InvocationGroup, describe_process
from lab.sandbox.gate import Attacher, Gate
from lab.sandbox.jail import JOIN_FAILED
from lab.sandbox.output import DEFAULT_HEAD, DEFAULT_TAIL, CappedStream, StreamRecord
from lab.sandbox.seccomp import Refusals

#: lingering processes described one by one (a fork bomb leaves hundreds: they are counted)
LINGERING_DESCRIBED = 32
#: how long the wrapper (strace, perf, or bwrap itself) may take to finish once the cgroup
#: is empty: tracers write their output after the traced processes are gone
WRAPPER_GRACE_S = 60.0
#: how long a tracer attached at the gate may take to attach (it takes milliseconds)
ATTACH_TIMEOUT_S = 30.0


@dataclass
class Outcome:
    """What happened to one sandboxed invocation."""

    exit_status: int | None
    #: the main process did not exit within the time limit; the cgroup was killed
    timed_out: bool
    #: spawn to the main process's exit, seconds
    wall_s: float
    #: CPU time of everything that ran in the invocation's cgroup (cpu.stat), seconds
    cpu_s: float | None
    main_pid: int | None
    #: processes still in the cgroup when the main process exited (the first
    #: LINGERING_DESCRIBED of them; ``lingering_count`` counts them all)
    lingering: list[ProcessInfo] = field(default_factory=list)
    lingering_count: int = 0
    #: of those, how many were still there after the grace and were killed
    lingering_killed: int = 0
    #: the cgroup emptied (False only if cgroup.kill itself failed: then a process escaped)
    contained: bool = True
    #: what the kernel reported for the cgroup; None until the invocation ended
    stats: CgroupStats | None = None
    stdout: StreamRecord | None = None
    stderr: StreamRecord | None = None
    #: the whole command (wrapper + sandbox + client) as lab.host.procs saw it; with a
    #: tracer attached at the gate, that tracer's command
    wrapper: procs.Completed | None = None
    #: one sentence when the sandbox itself failed (the client then never ran)
    sandbox_error: str | None = None
    #: one sentence when a tracer to attach at the gate did not (the client never ran)
    attach_error: str | None = None
    #: "home" / "tmp" -> what the bounded directory held after the invocation (set by the
    #: pass cell, which owns them; None where statvfs failed)
    disk: dict[str, DiskUse | None] = field(default_factory=dict)
    #: the system calls the sandbox's filter refused, as the kernel's audit log recorded
    #: them (set by the pass cell; None where no watch was kept)
    refused: Refusals | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_status": self.exit_status,
            "timed_out": self.timed_out,
            "wall_s": round(self.wall_s, 6),
            "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 6),
            "main_pid": self.main_pid,
            "lingering": [p.to_dict() for p in self.lingering],
            "lingering_count": self.lingering_count,
            "lingering_killed": self.lingering_killed,
            "contained": self.contained,
            "stats": {} if self.stats is None else self.stats.to_dict(),
            "stdout": None if self.stdout is None else self.stdout.to_dict(),
            "stderr": None if self.stderr is None else self.stderr.to_dict(),
            "sandbox_error": self.sandbox_error,
            "disk": {k: None if v is None else v.to_dict() for k, v in sorted(self.disk.items())},
            "refused": None if self.refused is None else self.refused.to_dict(),
        }


class _StatusReader:
    """Reads bwrap's JSON status lines (child pid, then exit code) in a thread."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.child_pid: int | None = None
        self.exit_code: int | None = None
        self.got_pid = threading.Event()
        #: the client's main process exited (bwrap reported its exit code), or bwrap ended
        self.got_exit = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read, name="bwrap status", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buf = b""
        try:
            while True:
                try:
                    chunk = os.read(self.fd, 4096)
                except InterruptedError:
                    continue
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self._line(line)
            if buf.strip():
                self._line(buf)
        except OSError:
            pass
        finally:
            os.close(self.fd)
            self.got_pid.set()
            self.got_exit.set()
            self.done.set()

    def _line(self, line: bytes) -> None:
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                if isinstance(obj.get("child-pid"), int):
                    self.child_pid = obj["child-pid"]
                    self.got_pid.set()
                if isinstance(obj.get("exit-code"), int):
                    self.exit_code = obj["exit-code"]
                    self.got_exit.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _first_child(init_pid: int, timeout_s: float = 2.0) -> int | None:
    """The host pid of bwrap's init's first child: the client's main process (pid 2 in the
    sandbox's PID namespace), which joins the cgroup and execs the client. None if it was
    gone before it could be seen."""
    path = Path(f"/proc/{init_pid}/task/{init_pid}/children")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            words = path.read_text().split()
        except OSError:
            return None  # init itself is gone
        if words:
            return int(words[0])
        time.sleep(0.0005)
    return None


def supervise(
    *,
    argv_for: Callable[[int], list[str]],
    group: InvocationGroup,
    timeout_s: float,
    linger_grace_s: float,
    stdout: Path,
    stderr: Path,
    purpose: str,
    log: procs.CommandLog | None,
    head: int = DEFAULT_HEAD,
    tail: int = DEFAULT_TAIL,
    echo: tuple[Callable[[bytes], None], Callable[[bytes], None]] | None = None,
    started: Callable[[], None] | None = None,
    gate: Gate | None = None,
    attach: Attacher | None = None,
) -> Outcome:
    """``echo``: callbacks given each chunk of stdout and of stderr as it arrives;
    ``started``: called once the client's main process runs (not if it never does);
    ``gate`` (passed to the jail, whose filter step waits there) and ``attach`` (a tracer
    to start on the waiting process): the tracer attached at the gate."""
    status_r, status_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    argv = argv_for(status_w)
    status = _StatusReader(status_r)
    out = CappedStream(out_r, stdout, head=head, tail=tail, echo=echo[0] if echo else None)
    err = CappedStream(err_r, stderr, head=head, tail=tail, echo=echo[1] if echo else None)
    out.start()
    err.start()
    bg, t0 = _spawn(argv, purpose, log, (status_w, out_w, err_w), gate)
    outcome = Outcome(exit_status=None, timed_out=False, wall_s=0.0, cpu_s=None, main_pid=None)
    tracer: list[procs.Background] = []
    try:
        attaching = None if gate is None or attach is None else (gate, attach, tracer)
        _watch(outcome, bg, status, group, t0, timeout_s, linger_grace_s, started, attaching)
    finally:
        # whatever happened above (an error, Ctrl-C): nothing of the client survives
        if gate is not None:
            gate.close()  # a filter step still at the gate exits, the client unrun
        outcome.contained = group.kill() and outcome.contained
        outcome.wrapper = bg.wait(WRAPPER_GRACE_S)
        if tracer:  # it ends once the processes it follows are gone
            outcome.wrapper = tracer[0].wait(WRAPPER_GRACE_S)
        status.join(5.0)
        outcome.stdout = out.join(10.0)
        outcome.stderr = err.join(10.0)
    _settle(outcome, status, group, stderr)
    return outcome


def _spawn(
    argv: list[str],
    purpose: str,
    log: procs.CommandLog | None,
    fds: tuple[int, int, int],
    gate: Gate | None,
) -> tuple[procs.Background, float]:
    """Start the jail with the status, stdout and stderr pipes' write ends (``fds``, closed
    here once it has them) and the gate's end, if any; return it and when it started."""
    status_w, out_w, err_w = fds
    passed = [status_w] if gate is None else [status_w, gate.jail_fd]
    bg = procs.Background(
        argv, purpose=purpose, log=log, stdout=out_w, stderr=err_w, pass_fds=passed
    )
    t0 = time.monotonic()
    try:
        bg.start()
    finally:
        for fd in fds:
            os.close(fd)
        if gate is not None:
            gate.spawned()
    return bg, t0


def _settle(outcome: Outcome, status: _StatusReader, group: InvocationGroup, stderr: Path) -> None:
    """The outcome's last facts once everything has ended: the exit status, the cgroup's
    figures, and whether the sandbox itself failed (not so when a tracer kept the gate
    shut: that is the tracer's failure)."""
    outcome.exit_status = status.exit_code
    outcome.stats = group.stats()
    outcome.cpu_s = outcome.stats.cpu_usage_s
    if outcome.attach_error is None and (
        outcome.main_pid is None or (status.exit_code == JOIN_FAILED and not outcome.cpu_s)
    ):
        outcome.sandbox_error = _sandbox_failure(outcome, stderr)


#: a gate to attach a tracer at: the gate, the tracer's attacher, and where the started
#: tracer is kept
Attaching = tuple[Gate, Attacher, list[procs.Background]]


def _watch(
    outcome: Outcome,
    bg: procs.Background,
    status: _StatusReader,
    group: InvocationGroup,
    t0: float,
    timeout_s: float,
    linger_grace_s: float,
    started: Callable[[], None] | None = None,
    attaching: Attaching | None = None,
) -> None:
    deadline = t0 + timeout_s
    # bwrap reports the client's pid once the sandbox is set up; if bwrap fails first, the
    # status pipe closes without it
    while not status.got_pid.wait(0.05):
        if time.monotonic() > deadline:
            outcome.timed_out = True
            return
        if not bg.alive() and not status.got_pid.is_set():
            status.got_pid.wait(1.0)
            break
    if status.child_pid is None:
        return
    outcome.main_pid = _first_child(status.child_pid) or status.child_pid
    if started is not None:
        started()
    if attaching is not None:
        gate, attach, tracer = attaching
        until = min(deadline, time.monotonic() + ATTACH_TIMEOUT_S)
        try:
            found = gate.attach(
                outcome.main_pid,
                attach,
                deadline=until,
                gone=lambda: status.got_exit.is_set() or not bg.alive(),
            )
            if found is not None:
                tracer.append(found)
        except CollectorError as exc:
            # the gate is closed: the filter step exits without running the client
            outcome.attach_error = str(exc)
    # the client's main process exited when bwrap reports its exit code (its init then
    # lives on, reaping, while anything the client left runs)
    exited = status.got_exit.wait(max(0.0, deadline - time.monotonic()))
    outcome.wall_s = time.monotonic() - t0
    if not exited:
        outcome.timed_out = True
        outcome.contained = group.kill()
        return
    left = group.pids()
    if not left:
        return
    outcome.lingering_count = len(left)
    outcome.lingering = [describe_process(pid) for pid in left[:LINGERING_DESCRIBED]]
    grace_end = time.monotonic() + linger_grace_s
    while time.monotonic() < grace_end and group.populated():
        time.sleep(0.01)
    outcome.lingering_killed = len(group.pids())
    outcome.contained = group.kill()


def _sandbox_failure(outcome: Outcome, stderr: Path) -> str:
    try:
        text = stderr.read_text(errors="replace").strip()
    except OSError:
        text = ""
    excerpt = " ".join(text.split())[-300:]
    if outcome.main_pid is None:
        where = "bwrap did not start the client"
    else:
        where = "the client could not join its cgroup"
    detail = f": {excerpt}" if excerpt else ""
    return f"the sandbox failed ({where}){detail}"
