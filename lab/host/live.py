"""Process groups the lab started and has not reaped yet, each with the scope it was started
in, so that Ctrl-C or an error stops every one of them, and a stage that ends stops only
its own (``lab.host.procs`` registers each process it spawns here).

    with process_scope() as scope:          # a Runner, say
        ...                                 # processes started here (and on threads given
                                            # this context) are registered in ``scope``
        stop_all(scope=scope)               # stops those, never an agent run beside it
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Process groups started by the lab and not yet reaped, so that Ctrl-C or an error stops
# every one of them (see ``stop_all``), each with the scope it was started in (see
# ``process_scope``).
_LIVE: dict[int, tuple[str, ProcessScope | None]] = {}
_LIVE_LOCK = threading.Lock()


class ProcessScope:
    """The processes started within one ``with process_scope()`` block, on its thread and
    on the threads it hands its context to (``contextvars.copy_context``), and in the
    scopes nested in it. ``stop_all(scope=…)`` stops those and no other: a judgement run
    on a thread beside a running agent (``--stop-on-plateau``) must not stop the agent."""

    def __init__(self, parent: ProcessScope | None) -> None:
        self.parent = parent

    def holds(self, other: ProcessScope | None) -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False


_SCOPE: contextvars.ContextVar[ProcessScope | None] = contextvars.ContextVar(
    "lab_process_scope", default=None
)


@contextmanager
def process_scope() -> Iterator[ProcessScope]:
    """A scope nested in the current one; processes started within are registered in it."""
    scope = ProcessScope(_SCOPE.get())
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def register(pid: int, purpose: str) -> None:
    with _LIVE_LOCK:
        _LIVE[pid] = (purpose, _SCOPE.get())


def unregister(pid: int) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(pid, None)


def live_processes(scope: ProcessScope | None = None) -> dict[int, str]:
    """pid -> purpose of every live process group, or of those started within ``scope``."""
    with _LIVE_LOCK:
        return {
            pid: purpose
            for pid, (purpose, where) in _LIVE.items()
            if scope is None or scope.holds(where)
        }


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop_all(grace_s: float = 2.0, *, scope: ProcessScope | None = None) -> list[str]:
    """Stop every process group the lab started and has not reaped (or only those started
    within ``scope``); return their purposes."""
    stopped: list[str] = []
    for pid, purpose in live_processes(scope).items():
        kill_group(pid, signal.SIGTERM)
        stopped.append(purpose)
    deadline = time.monotonic() + grace_s
    while live_processes(scope) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in live_processes(scope):
        kill_group(pid, signal.SIGKILL)
    return stopped


@contextmanager
def stopping_everything() -> Iterator[None]:
    """Stop every started process group on any exit, including Ctrl-C."""
    try:
        yield
    finally:
        stop_all()


class Beside:
    """``work`` on a thread of its own, in a copy of this thread's context (the processes
    it starts belong to the caller's process scope, so stopping the caller stops them);
    ``join`` re-raises what it raised, once.

        closing = Beside(cell.close, name="timing cell close")
        ...                                 # the caller goes on
        closing.join()                      # raises what cell.close raised
    """

    def __init__(self, work: Callable[[], None], *, name: str) -> None:
        self.error: BaseException | None = None
        context = contextvars.copy_context()
        self.thread = threading.Thread(
            target=context.run, args=(self._run, work), name=name, daemon=True
        )
        self.thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # re-raised on the joining thread
            self.error = exc

    def join(self, *, raise_error: bool = True) -> None:
        self.thread.join()
        error, self.error = self.error, None
        if error is not None and raise_error:
            raise error
