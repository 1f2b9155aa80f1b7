"""What every collector is: one module per external tool, owning its command line, its
parser, its accepted return codes, its raw output and its "unavailable because …" message.

Process collectors (strace, bpftrace, perf) *wrap* the client's command line, because each
runs the client as its own child; they never share a pass. The packet collector is passive
and runs beside any pass.

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
from typing import Any, ClassVar

from lab.host.procs import CommandLog, Completed
from lab.model import ObserverStatus


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

    def relative(self, path: Path) -> str:
        """Run-relative path for results.json (no host paths in reports)."""
        return str(path.resolve().relative_to(self.run_dir.resolve()))


@dataclass
class CollectorOutput:
    """What a collector observed for one invocation.

    ``summary`` is the parsed view that goes into ``observed.<name>`` of results.json;
    ``artifacts`` are the raw files kept verbatim (paths relative to the run directory);
    ``error`` (one sentence) is set instead of ``summary`` when the tool failed, crashed or
    hung: the scenario is then judged from the remaining evidence.
    """

    name: str
    summary: dict[str, Any] | None
    artifacts: list[str] = field(default_factory=list)
    error: str | None = None
    #: the client's exit status as the tracer saw it, when the tracer is the parent and the
    #: wrapper's own status is not the client's (bpftrace); None otherwise
    client_exit_status: int | None = None


class ProcessCollector(ABC):
    """A tracer that runs the client as its child."""

    name: ClassVar[str]
    #: exit statuses of the wrapped command that are not a tracer failure
    #: (None: the tracer passes the client's status through, so any status is accepted)
    accepted_status: ClassVar[tuple[int, ...] | None] = None
    #: True when the wrapped command's exit status is the client's own
    passes_exit_status: ClassVar[bool] = True

    @classmethod
    @abstractmethod
    def probe(cls) -> ObserverStatus:
        """Can this collector run here? Never raises; the reason names the fix."""

    @abstractmethod
    def wrap(self, client_argv: list[str], ctx: InvocationContext) -> list[str]:
        """The command line to run instead of ``client_argv``. The client's stdout must
        remain the wrapped command's stdout (tracer output goes to files in out_dir)."""

    @abstractmethod
    def collect(self, ctx: InvocationContext, completed: Completed) -> CollectorOutput:
        """Parse the raw files left in ``ctx.out_dir``; never raises for tool failures."""
