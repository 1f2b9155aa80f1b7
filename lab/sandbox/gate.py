"""The gate before the client: where the jail's last step waits for a tracer to attach.

A tracer that *runs* the jail (``strace -f -- nsenter … bwrap … client``) traces every step
of it before the client: bwrap building the sandbox's file tree, the joining shell and its
``mount``, capsh, the dynamic loader of each. On these machines a traced system call costs
about 0.16 ms, and those steps are about 1,800 calls against a backup client's 100, so most
of a traced invocation's time was the jail's, not the client's (docs/performance.md,
round 12). With a gate the jail runs untraced up to its filter step (``lab-filter
--gate=FD``), which says "R" on the gate's socket and waits; the lab then attaches the
tracer to that process (``strace -p``: it follows every later fork and exec), waits until
the kernel shows the tracer attached, and says "G". The trace then starts at the gate: the
filter's last calls, prlimit, and the client from its own ``execve`` on, with everything it
starts.

    gate = Gate()                                   # before the jail is spawned
    spec = replace(spec, gate_fd=gate.jail_fd)      # lab-filter --gate=FD
    ...                                             # spawn the jail with pass_fds=[gate.jail_fd]
    gate.spawned()                                  # the lab closes the jail's end
    tracer = gate.attach(main_pid, start=lambda pid: procs.Background([...]).start(),
                         deadline=t, gone=jail_ended)   # None: the jail ended first

A gate that is closed instead of opened (the tracer never attached, the lab stops) makes the
filter step exit 125 without running the client: nothing runs unobserved.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from pathlib import Path

from lab.errors import CollectorError
from lab.host import procs

#: what the filter step says when it waits, and what lets it go on (native/filter)
READY = b"R"
GO = b"G"
#: how often the lab looks for the tracer in the process's status (seconds)
_POLL_S = 0.0005
#: how often the lab, waiting for the filter step, checks that the jail still runs
_READY_POLL_S = 0.05


class Gate:
    """A socket pair: the jail's end is passed to the spawned jail (``jail_fd``), the lab
    keeps the other."""

    def __init__(self) -> None:
        self._lab, self._jail = socket.socketpair()
        self._jail.set_inheritable(True)

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
        *,
        start: Callable[[int], procs.Background],
        deadline: float,
        gone: Callable[[], bool],
    ) -> procs.Background | None:
        """Once the filter step ``pid`` waits at the gate, start the tracer on it
        (``start(pid)``), wait until the kernel names that tracer in ``/proc/PID/status``,
        then open the gate and return the tracer. None (the gate closed): the jail ended
        before its gate (``gone()``), which the sandbox reports as its own failure. Raises
        CollectorError (the gate closed, the client never run) when the tracer ended
        before it attached, or ``deadline`` passed."""
        try:
            if not self.wait_ready(deadline, gone):
                self.close()
                return None
            tracer = start(pid)
            try:
                _wait_traced(pid, tracer, deadline)
            except BaseException:
                self.close()
                tracer.stop()
                raise
        except BaseException:
            self.close()
            raise
        self.open()
        return tracer


def tracer_of(pid: int) -> int | None:
    """The pid ``/proc/PID/status`` names as tracing ``pid`` (None: none, or pid gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("TracerPid:"):
            found = int(line.split()[1])
            return found or None
    return None


def _wait_traced(pid: int, tracer: procs.Background, deadline: float) -> None:
    # strace seizes the process and interrupts it in the same breath (PTRACE_SEIZE, then
    # PTRACE_INTERRUPT): once the kernel shows a tracer, the process stops at its next
    # return to user space, before the gate's answer can take it any further
    while True:
        if tracer_of(pid) == tracer.pid:
            return
        if not tracer.alive():
            done = tracer.wait(0)
            excerpt = done.stderr_excerpt() or f"exit status {done.exit_status}"
            raise CollectorError(f"{tracer.purpose} ended before it attached ({excerpt})")
        if time.monotonic() > deadline:
            raise CollectorError(f"{tracer.purpose} did not attach in time")
        time.sleep(_POLL_S)
