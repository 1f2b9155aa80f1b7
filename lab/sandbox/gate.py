"""The gate before the client: where the jail's last step waits for a tracer to attach.

A tracer that *runs* the jail (``strace -f -- nsenter … bwrap … client``) traces every step
of it before the client: bwrap building the sandbox's file tree, the joining shell and its
``mount``, capsh, the dynamic loader of each. On these machines a traced system call costs
about 0.16 ms, and those steps are about 1,800 calls against a backup client's 100, so most
of a traced invocation's time was the jail's, not the client's (docs/performance.md,
round 12). With a gate the jail runs untraced up to its filter step (``lab-filter
--gate=FD``), which says "R" on the gate's socket and waits; the lab then attaches the
tracer to that process (``strace -p``: it follows every later fork and exec), waits until
the tracer says it has attached, and says "G". The trace then starts at the gate: the
filter's last calls, prlimit, and the client from its own ``execve`` on, with everything it
starts.

    gate = Gate()                                   # before the jail is spawned
    spec = replace(spec, gate_fd=gate.jail_fd)      # lab-filter --gate=FD
    ...                                             # spawn the jail with pass_fds=[gate.jail_fd]
    gate.spawned()                                  # the lab closes the jail's end
    tracer = gate.attach(main_pid, Attacher(start=..., ready=...),
                         deadline=t, gone=jail_ended)   # None: the jail ended first

A gate that is closed instead of opened (the tracer never attached, the lab stops) makes the
filter step exit 125 without running the client: nothing runs unobserved.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from lab.errors import CollectorError
from lab.host import procs

#: what the filter step says when it waits, and what lets it go on (native/filter)
READY = b"R"
GO = b"G"
#: how often the lab asks whether the tracer is ready (seconds)
_POLL_S = 0.0005
#: how often the lab, waiting for the filter step, checks that the jail still runs
_READY_POLL_S = 0.05


@dataclass(frozen=True)
class Attacher:
    """A tracer to attach at the gate. ``start(pid)`` starts it on the waiting process and
    returns it; ``ready(pid)`` is true once it has attached in a way that lets the process
    take no further step unobserved. For strace that is its "Process PID attached" message,
    which it writes after both PTRACE_SEIZE and PTRACE_INTERRUPT: from then on the process
    stops at its next return to user space until strace resumes it, tracing every call.
    The kernel naming a tracer (``TracerPid``) is not enough: it is set by the seize alone,
    and a process let through then ran prlimit's execve before strace stopped it (strace:
    "Stray PTRACE_EVENT_EXEC", seen under load in the lab image)."""

    start: Callable[[int], procs.Background]
    ready: Callable[[int], bool]


class Gate:
    """A socket pair: the jail's end is passed to the spawned jail (``jail_fd``), the lab
    keeps the other."""

    def __init__(self) -> None:
        # neither end is inheritable: the jail gets its end through ``pass_fds`` alone
        self._lab, self._jail = socket.socketpair()

    @property
    def jail_fd(self) -> int:
        """The descriptor number the jail inherits (``pass_fds``) and the filter reads."""
        return self._jail.fileno()

    def spawned(self) -> None:
        """The jail has its copy: the lab's copy of the jail's end is closed, so that the
        filter step sees the end of the stream once the lab closes its own."""
        self._jail.close()

    def wait_ready(self, deadline: float, gone: Callable[[], bool]) -> bool:
        """Whether the filter step said it waits, before ``deadline`` (monotonic). False:
        the jail ended (``gone()``) or failed before reaching the gate. (bwrap's own
        processes hold copies of the jail's end, so its closing is not the sign.)"""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or gone():
                return False
            self._lab.settimeout(min(remaining, _READY_POLL_S))
            try:
                return self._lab.recv(1) == READY
            except TimeoutError:
                continue
            except OSError:
                return False

    def open(self) -> None:
        """Let the filter step go on (it execs prlimit, then the client)."""
        with contextlib.suppress(OSError):
            self._lab.sendall(GO)
        self.close()

    def close(self) -> None:
        """Close the lab's end: a filter step still waiting exits 125, the client unrun."""
        self._lab.close()
        self._jail.close()

    def attach(
        self,
        pid: int,
        attacher: Attacher,
        *,
        deadline: float,
        gone: Callable[[], bool],
    ) -> procs.Background | None:
        """Once the filter step ``pid`` waits at the gate, start the tracer on it, wait until
        it is ready (``Attacher.ready``), then open the gate and return the tracer. None
        (the gate closed): the jail ended before its gate (``gone()``), which the sandbox
        reports as its own failure. Raises CollectorError (the gate closed, the client never
        run) when the tracer ended before it was ready, or ``deadline`` passed."""
        try:
            if not self.wait_ready(deadline, gone):
                self.close()
                return None
            tracer = attacher.start(pid)
            try:
                wait_attached(pid, attacher, tracer, deadline)
            except BaseException:
                tracer.stop()
                raise
        except BaseException:
            self.close()
            raise
        self.open()
        return tracer


def wait_attached(pid: int, attacher: Attacher, tracer: procs.Background, deadline: float) -> None:
    """Return once ``tracer`` (started by ``attacher``) is ready on ``pid``; raise
    CollectorError when it ended first or ``deadline`` (monotonic) passed. The gate's wait,
    and the strace probe's."""
    while not attacher.ready(pid):
        if not tracer.alive():
            done = tracer.wait(0)
            excerpt = done.stderr_excerpt() or f"exit status {done.exit_status}"
            raise CollectorError(f"{tracer.purpose} ended before it attached ({excerpt})")
        if time.monotonic() > deadline:
            raise CollectorError(f"{tracer.purpose} did not attach in time")
        time.sleep(_POLL_S)
