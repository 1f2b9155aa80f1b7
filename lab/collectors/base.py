"""What every collector is: one module per external tool, owning its command line, its
parser, its accepted return codes, its raw output and its "unavailable because …" message.

Process collectors (strace, perf) *wrap* the sandboxed client's command line, because each
runs it as its own child (following every fork); one that can instead *attach* to the
sandbox's main process (strace: ``attacher``) does so at the jail's gate
(``lab.sandbox.gate``), so that it follows the client from its own ``execve`` on and not the
jail's steps before it. Session collectors (bpftrace, the packet
capture) attach once per pass (bpftrace: or once for several passes, ``lab.run.phases``)
and attribute what they see to each invocation: bpftrace by
the invocation's cgroup id, the capture (inside the pass's network namespace, every
interface, no filter) by the invocation's time window. Tracers change execution, so the
process collectors and bpftrace never share a pass; the capture is passive and runs beside
any pass.

    collector = StraceCollector()
    status = collector.probe()              # ObserverStatus for doctor and results.json
    argv = collector.wrap(client_argv, ctx) # run this instead of the client
    ...                                     # the runner runs it, through lab.procs
    out = collector.collect(ctx, completed) # parse the raw files it left in ctx.out_dir
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from lab.host.procs import CommandLog, Completed
from lab.model import ObserverStatus
from lab.model.observed import ObserverSummary

if TYPE_CHECKING:
    from lab.sandbox.gate import Attacher


@dataclass
class InvocationContext:
    """Everything a collector may need about the invocation it observes."""

    run_dir: Path
    #: this invocation's directory for raw artifacts (exists; collectors write only here)
    out_dir: Path
    client_path: Path
    source_path: Path
    source_size: int
    receiver_port: int
    decoy_port: int
    invocation: int
    log: CommandLog
    #: per-invocation time limit for the client, seconds
    timeout_s: float = 120.0

    #: the main process bwrap reported (host pid), set once the invocation ran; a wrapping
    #: tracer uses it to tell the client's part of its trace from the sandbox's own steps
    client_pid: int | None = None
    #: the pass's private scratch directory (root's, removed with the pass): a collector's
    #: working files that are not evidence (perf's copy of the kernel's symbol table)
    scratch: Path | None = None

    def relative(self, path: Path) -> str:
        """Run-relative path for results.json (no host paths in reports)."""
        return str(path.resolve().relative_to(self.run_dir.resolve()))


@dataclass
class Window:
    """When one invocation ran (realtime seconds, as pcap timestamps are), and the cgroup
    that held it."""

    index: int
    out_dir: Path
    cgroup_path: Path | None
    cgroup_id: int | None
    start: float = 0.0
    end: float = 0.0


@dataclass
class SessionContext:
    """What a session collector attached to invocation cgroups needs: where its raw output
    goes, the client it probes and the invocations it observes. One pass, or several passes
    that share one bpftrace session (``lab.run.phases``)."""

    run_dir: Path
    #: the session's evidence directory (session-level raw output goes here)
    out_dir: Path
    client_path: Path
    log: CommandLog
    #: one per invocation, in order; start/end filled as each one runs
    windows: list[Window]

    def relative(self, path: Path) -> str:
        return str(path.resolve().relative_to(self.run_dir.resolve()))


@dataclass
class PassContext(SessionContext):
    """Everything a session collector needs about the one pass it observes."""

    source_path: Path
    receiver_address: tuple[str, int]
    decoy_address: tuple[str, int]
    #: the prefix that runs a command inside the pass's network namespace (empty: none)
    netns_argv: list[str]


@dataclass
class CollectorOutput:
    """What a collector observed for one invocation.

    ``summary`` is the parsed view that goes into ``observed.<name>`` of results.json;
    ``artifacts`` are the raw files kept verbatim (paths relative to the run directory);
    ``error`` (one sentence) is set instead of ``summary`` when the tool failed, crashed or
    hung: the scenario is then judged from the remaining evidence.
    """

    name: str
    summary: ObserverSummary | None
    artifacts: list[str] = field(default_factory=list)
    error: str | None = None


class SessionCollector(ABC):
    """A collector attached once per pass (before the first invocation, stopped after the
    last), whose raw output is split per invocation with the same keys."""

    name: ClassVar[str]

    @abstractmethod
    def start(self, ctx: PassContext) -> None:
        """Attach; return once attached. Raises CollectorError when it cannot."""

    @abstractmethod
    def stop(self) -> dict[int, CollectorOutput]:
        """Detach and parse: one output per invocation index; never raises for tool
        failures (each output then carries the error)."""


class ProcessCollector(ABC):
    """A tracer that runs the client as its child."""

    name: ClassVar[str]
    #: exit statuses of the wrapped command that are not a tracer failure
    #: (None: the tracer passes the client's status through, so any status is accepted)
    accepted_status: ClassVar[tuple[int, ...] | None] = None
    #: ``collect`` only reads the files the wrapped command left, so a phased run may call
    #: it after the phase, several at once (``lab.run.deferred``)
    deferrable: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def probe(cls) -> ObserverStatus:
        """Can this collector run here? Never raises; the reason names the fix."""

    @abstractmethod
    def wrap(self, client_argv: list[str], ctx: InvocationContext) -> list[str]:
        """The command line to run instead of ``client_argv``. The client's stdout must
        remain the wrapped command's stdout (tracer output goes to files in out_dir)."""

    def attacher(self, ctx: InvocationContext) -> Attacher | None:
        """How this tracer attaches to a running process (the sandbox's main process,
        waiting at its gate: ``lab.sandbox.gate.Attacher``); ``collect`` then gets that
        command's record. None (the default): the tracer wraps the jail instead."""
        return None

    @abstractmethod
    def collect(self, ctx: InvocationContext, completed: Completed) -> CollectorOutput:
        """Parse the raw files left in ``ctx.out_dir``; never raises for tool failures."""
