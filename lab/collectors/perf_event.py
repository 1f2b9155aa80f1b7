"""Which event ``perf record`` samples on this machine, and whether perf may sample at all
(``kernel.perf_event_paranoid`` and the lab's privilege). Split out of
``lab.collectors.perf``, which re-exports every name."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from lab.host.capabilities import effective_capabilities

#: where the kernel exposes the AMD IBS op PMU (perf-amd-ibs(1))
IBS_OP_DEVICE = Path("/sys/bus/event_source/devices/ibs_op")
#: per-process (``-- COMMAND``) IBS sampling needs Linux 6.2 or later (perf-amd-ibs(1))
IBS_PER_PROCESS_KERNEL = (6, 2)
#: sampling period for ibs_op, the documented example value (perf-amd-ibs(1))
IBS_PERIOD = 100_000
#: cpu-clock sampling frequency; 999 rather than 1000 so the samples do not beat in lockstep
#: with periodic 1 ms timers
CPU_CLOCK_HZ = 999
PARANOID_PATH = Path("/proc/sys/kernel/perf_event_paranoid")


@dataclass(frozen=True)
class EventChoice:
    """Which event ``perf record`` samples, and why."""

    #: the summary's name for it: "ibs_op" or "cpu-clock"
    event: str
    #: what ``perf record -e`` is given
    perf_event: str
    #: the sampling options that go with it
    sampling: tuple[str, ...]
    reason: str


def _kernel_version(release: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", release)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def choose_event(
    ibs_device: Path = IBS_OP_DEVICE, kernel_release: str | None = None
) -> EventChoice:
    """``ibs_op`` where the CPU/kernel expose it for a single process, else ``cpu-clock``."""
    release = kernel_release if kernel_release is not None else os.uname().release
    cpu_clock = ("cpu-clock", ("-F", str(CPU_CLOCK_HZ)))
    if not ibs_device.exists():
        why = (
            f"ibs_op is not exposed by this CPU/kernel ({ibs_device} absent); "
            "using the software cpu-clock event"
        )
        return EventChoice("cpu-clock", cpu_clock[0], cpu_clock[1], why)
    if _kernel_version(release) < IBS_PER_PROCESS_KERNEL:
        why = (
            f"ibs_op is exposed but kernel {release} predates per-process IBS sampling "
            "(Linux 6.2); using the software cpu-clock event"
        )
        return EventChoice("cpu-clock", cpu_clock[0], cpu_clock[1], why)
    why = f"ibs_op is exposed by this CPU/kernel ({ibs_device} present); sampling IBS ops"
    return EventChoice("ibs_op", "ibs_op//", ("-c", str(IBS_PERIOD)), why)


def read_paranoid(path: Path = PARANOID_PATH) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _privileged() -> bool:
    caps = effective_capabilities()
    return os.geteuid() == 0 or "CAP_PERFMON" in caps or "CAP_SYS_ADMIN" in caps


def paranoid_blocks(paranoid: int | None, privileged: bool) -> bool:
    """Does kernel.perf_event_paranoid forbid profiling our own child?

    Root, CAP_PERFMON or CAP_SYS_ADMIN bypass it; up to 2 an unprivileged user may still
    profile its own processes in user space; Debian's 3 forbids it.
    """
    return not privileged and paranoid is not None and paranoid > 2
