"""What the agent command did in one repetition of a campaign (``AgentRecord``) and the patch it
left (``PatchRecord``), each with ``to_dict()``/``from_dict()``; re-exported by
:mod:`lab.model.campaign`, whose repetition rows hold them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class AgentRecord:
    """What the agent command did in one repetition."""

    exit_status: int | None
    timed_out: bool
    duration_s: float
    lingering_count: int
    contained: bool
    sandbox_error: str | None
    stdout_bytes: int
    stderr_bytes: int
    #: what the kernel reported for the agent's cgroup (CPU, peak memory, pids; a figure
    #: not kept here is None) and the processes still there when its main process exited
    cgroup: dict[str, Any] | None = None
    lingering: tuple[dict[str, Any], ...] = ()
    #: the end of agent.stderr when the agent exited non-zero or could not start (what the
    #: console says beside the outcome, "sh: 0: cannot open ..."); None otherwise
    stderr_tail: str | None = None

    @property
    def crashed(self) -> bool:
        return self.sandbox_error is not None or self.exit_status != 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_status": self.exit_status,
            "timed_out": self.timed_out,
            "duration_s": self.duration_s,
            "lingering_count": self.lingering_count,
            "contained": self.contained,
            "sandbox_error": self.sandbox_error,
            "stdout_bytes": self.stdout_bytes,
            "stderr_bytes": self.stderr_bytes,
            "stderr_tail": self.stderr_tail,
            "cgroup": self.cgroup,
            "lingering": [dict(p) for p in self.lingering],
            "stdout": "agent.stdout",
            "stderr": "agent.stderr",
        }


@dataclass(frozen=True, kw_only=True)
class PatchRecord:
    sha256: str
    bytes: int
    files_changed: tuple[str, ...]
    outside_native: tuple[str, ...]
    native_empty: bool
    final_commit: str | None
    bundle_sha256: str | None
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "bytes": self.bytes,
            "files_changed": list(self.files_changed),
            "outside_native": list(self.outside_native),
            "native_empty": self.native_empty,
            "final_commit": self.final_commit,
            "bundle_sha256": self.bundle_sha256,
            "problem": self.problem,
        }
