"""The collector registry: every collector the lab knows, defined once — its name, kind,
module and class, the tool it runs (``lab.host.tools`` names the Debian package), the
command that prints the tool's version, and whether it needs tracefs. The parser's
``--collector`` choices, ``doctor``'s probes, the planner's passes and the model's observer
names are all read from here.

    [c.name for c in COLLECTORS]          # ['strace', 'bpftrace', 'perf', 'packets']
    collector("perf").package             # 'linux-perf'
    PROCESS_COLLECTORS                    # ('strace', 'bpftrace', 'perf'): each its own pass

This module imports nothing of the lab but the tool table (which imports nothing), so every
layer, the model included, may read it; the collector modules themselves are imported lazily
(``lab.collectors``) so that one broken module only makes its own collector unavailable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lab.host.tools import package_for

#: ``wrapper``: wraps the client's command line, one pass of its own (a tracer changes
#: execution); ``session``: attached once per pass (or for several passes), its own pass;
#: ``capture``: passive, beside every pass
Kind = Literal["wrapper", "session", "capture"]


@dataclass(frozen=True)
class Collector:
    name: str
    kind: Kind
    #: the module and class that implement it (imported lazily)
    module: str
    cls: str
    #: the command on PATH it runs
    tool: str
    #: argv whose first output line is the tool's version
    version_argv: tuple[str, ...]
    #: whether its probe needs tracefs and debugfs mounted (doctor mounts them as root)
    needs_tracefs: bool = False

    @property
    def package(self) -> str | None:
        """The Debian package that provides the tool."""
        return package_for(self.tool)


COLLECTORS: tuple[Collector, ...] = (
    Collector(
        "strace", "wrapper", "lab.collectors.strace", "StraceCollector", "strace",
        ("strace", "-V"),
    ),
    Collector(
        "bpftrace", "session", "lab.collectors.bpftrace", "BpftraceSession", "bpftrace",
        ("bpftrace", "--version"), needs_tracefs=True,
    ),
    Collector(
        "perf", "wrapper", "lab.collectors.perf", "PerfCollector", "perf",
        ("perf", "--version"), needs_tracefs=True,
    ),
    Collector(
        "packets", "capture", "lab.collectors.packets", "PacketCapture", "tcpdump",
        ("tcpdump", "--version"),
    ),
)  # fmt: skip

#: every collector's name, in the order reports list them
COLLECTOR_NAMES: tuple[str, ...] = tuple(c.name for c in COLLECTORS)
#: the collectors that observe the client in a pass of their own (after the untraced one)
PROCESS_COLLECTORS: tuple[str, ...] = tuple(c.name for c in COLLECTORS if c.kind != "capture")
#: the passive capture that runs beside every pass (``--packets``)
CAPTURE: str = next(c.name for c in COLLECTORS if c.kind == "capture")


def collector(name: str) -> Collector:
    """The collector called ``name``; ``KeyError`` when there is none."""
    for found in COLLECTORS:
        if found.name == name:
            return found
    raise KeyError(name)
