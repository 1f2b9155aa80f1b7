"""The sandbox's records of one invocation: what the kernel reported for its cgroup
(``CgroupStats``) and a process found in it (``ProcessInfo``). The sandbox produces them
(``lab.sandbox.cgroup``); the model holds them in ``SandboxRecord``.

    stats = CgroupStats(cpu_usage_s=0.12, memory_peak_bytes=4_194_304)
    CgroupStats.from_dict(stats.to_dict()) == stats
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CgroupStats:
    """What the kernel reported for one invocation's cgroup once it emptied: CPU time of
    everything that ran inside (cpu.stat), the memory and pids peaks, how often pids.max was
    hit, OOM kills. A figure the kernel does not keep here is None, never 0."""

    cpu_usage_s: float | None = None
    cpu_user_s: float | None = None
    cpu_system_s: float | None = None
    memory_peak_bytes: int | None = None
    pids_peak: int | None = None
    pids_max_hit: int | None = None
    oom_kills: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu_usage_s": self.cpu_usage_s,
            "cpu_user_s": self.cpu_user_s,
            "cpu_system_s": self.cpu_system_s,
            "memory_peak_bytes": self.memory_peak_bytes,
            "pids_peak": self.pids_peak,
            "pids_max_hit": self.pids_max_hit,
            "oom_kills": self.oom_kills,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CgroupStats:
        def number(key: str) -> Any:
            value = data.get(key)
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None

        return cls(**{key: number(key) for key in cls().to_dict()})


@dataclass(frozen=True)
class ProcessInfo:
    """A process found in an invocation's cgroup (a lingering one, typically)."""

    pid: int
    comm: str
    argv: list[str]
    #: seconds since the process started, when it was found
    age_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "comm": self.comm,
            "argv": list(self.argv),
            "age_s": None if self.age_s is None else round(self.age_s, 3),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessInfo:
        """One ``lingering[]`` record of a sandbox record."""
        return cls(
            pid=data["pid"], comm=data["comm"], argv=list(data["argv"]), age_s=data.get("age_s")
        )
