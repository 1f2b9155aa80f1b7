"""One pass of a scenario and its invocations, as the lab observed them: the client's own
claim, the receiver's and the decoy's summaries, the independent backup check, the sandbox's
record and every observer's summary. No I/O lives here; ``lab.model`` re-exports these types
beside the scenario- and run-level ones, and each ``to_dict()`` is its part of
``results.json`` (``lab/schemas/results.schema.json``).

    inv = Invocation(index=1, claim=ClientClaim(...), verifier=VerifierCheck(...),
                     receiver=ReceiverSummary(...), decoy=DecoySummary(...))
    inv.observed.add(StraceSummary(source_bytes_read=262144, ...))   # lab.model.observed
    p = Pass(collector="strace", invocations=[inv], receiver_address=..., decoy_address=...)
    p.to_dict()["invocations"][0]["verifier"]["verified"]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lab.model.endpoints import ClientClaim, DecoySummary, ReceiverSummary, VerifierCheck
from lab.model.observed import Observed
from lab.model.read import mapping, required
from lab.model.sandbox import CgroupStats, ProcessInfo

#: A process still in the invocation's cgroup when the client's main process exited: the
#: sandbox's own record of it (pid, comm, argv, age), kept as found.
Lingering = ProcessInfo


@dataclass
class SandboxRecord:
    """How one invocation was contained (``lab.sandbox``), and what that saw."""

    #: False: the client ran outside any sandbox (``--sandbox off``), as the lab's user
    enabled: bool
    cgroup: str | None = None
    cgroup_id: int | None = None
    main_pid: int | None = None
    #: processes left in the cgroup when the main process exited (the first 32 described;
    #: ``lingering_count`` counts them all)
    lingering: list[Lingering] = field(default_factory=list)
    lingering_count: int = 0
    #: of those, still running after the grace, then killed with cgroup.kill
    lingering_killed: int = 0
    #: the cgroup emptied at the end (False: a process escaped the kill)
    contained: bool = True
    #: CPU time, memory and pids peaks, pids.max hits, OOM kills (what the kernel reports);
    #: None without a sandbox (``{}`` in results.json)
    stats: CgroupStats | None = None
    #: totals and omissions of the client's stdout and stderr
    stdout: dict[str, Any] = field(default_factory=dict)
    stderr: dict[str, Any] = field(default_factory=dict)
    #: one sentence when the sandbox itself failed (the client then never ran)
    error: str | None = None
    #: "home" / "tmp" -> what the bounded directory held after the invocation (bytes and
    #: inodes used, the bounds, whether it was full: lab.sandbox.boxfs.DiskUse); None where
    #: it could not be read; empty without a sandbox
    disk: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    #: the system calls the sandbox's filter refused (``lab.sandbox.seccomp.Refusals``:
    #: observer, observed, reason, calls, total, suppressed, raw); None where no watch was
    #: kept (no sandbox, records before the filter)
    refused: dict[str, Any] | None = None

    @property
    def refused_calls(self) -> dict[str, int]:
        """Refused call -> count, as observed (empty when none or not observed)."""
        if not self.refused or not self.refused.get("observed"):
            return {}
        return {str(k): int(v) for k, v in (self.refused.get("calls") or {}).items()}

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "enabled": self.enabled,
            "cgroup": self.cgroup,
            "cgroup_id": self.cgroup_id,
            "main_pid": self.main_pid,
            "lingering": [p.to_dict() for p in self.lingering],
            "lingering_count": self.lingering_count,
            "lingering_killed": self.lingering_killed,
            "contained": self.contained,
            "stats": {} if self.stats is None else self.stats.to_dict(),
            "stdout": dict(self.stdout),
            "stderr": dict(self.stderr),
            "error": self.error,
        }
        if self.disk:  # absent without a sandbox (and in records before the bound)
            row["disk"] = {k: None if v is None else dict(v) for k, v in sorted(self.disk.items())}
        if self.refused is not None:
            row["refused"] = dict(self.refused)
        return row

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SandboxRecord:
        """``…sandbox`` of an invocation in results.json."""
        return cls(
            enabled=bool(data["enabled"]),
            cgroup=data.get("cgroup"),
            cgroup_id=data.get("cgroup_id"),
            main_pid=data.get("main_pid"),
            lingering=[Lingering.from_dict(p) for p in data.get("lingering", [])],
            lingering_count=int(data.get("lingering_count", 0)),
            lingering_killed=int(data.get("lingering_killed", 0)),
            contained=bool(data.get("contained", True)),
            stats=CgroupStats.from_dict(mapping(data["stats"], "sandbox.stats"))
            if data.get("stats")
            else None,
            stdout=dict(data.get("stdout") or {}),
            stderr=dict(data.get("stderr") or {}),
            error=data.get("error"),
            disk={
                str(k): None if v is None else dict(mapping(v, "sandbox.disk"))
                for k, v in mapping(data.get("disk") or {}, "sandbox.disk").items()
            },
            refused=None
            if data.get("refused") is None
            else dict(mapping(data["refused"], "sandbox.refused")),
        )


@dataclass
class Invocation:
    """One run of the client inside one pass, with everything observed about it."""

    index: int
    claim: ClientClaim
    verifier: VerifierCheck
    receiver: ReceiverSummary
    decoy: DecoySummary
    sandbox: SandboxRecord = field(default_factory=lambda: SandboxRecord(enabled=False))
    #: each observer's parsed summary (only observers that ran for this invocation)
    observed: Observed = field(default_factory=Observed)
    #: observer name -> why it did not produce a summary for this invocation
    missing: dict[str, str] = field(default_factory=dict)
    #: observer name -> run-relative paths of raw artifacts kept verbatim
    artifacts: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "exit_status": self.claim.exit_status,
            "claimed_success": self.claim.claimed_success,
            "client": self.claim.to_dict(),
            "verifier": self.verifier.to_dict(),
            "receiver": self.receiver.to_dict(),
            "decoy": self.decoy.to_dict(),
            "sandbox": self.sandbox.to_dict(),
            "observed": self.observed.to_dict(),
            "missing": {k: self.missing[k] for k in sorted(self.missing)},
            "artifacts": {k: sorted(v) for k, v in sorted(self.artifacts.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Invocation:
        """One ``invocations[]`` record of a pass."""
        decoy = mapping(required(data, "decoy", "invocation"), "invocation.decoy")
        return cls(
            index=int(data["index"]),
            claim=ClientClaim.from_dict(
                mapping(required(data, "client", "invocation"), "invocation.client")
            ),
            verifier=VerifierCheck.from_dict(
                mapping(required(data, "verifier", "invocation"), "verifier")
            ),
            receiver=ReceiverSummary.from_dict(
                mapping(required(data, "receiver", "invocation"), "receiver")
            ),
            decoy=DecoySummary.from_dict(decoy),
            sandbox=SandboxRecord.from_dict(
                mapping(data.get("sandbox") or {"enabled": False}, "sandbox")
            ),
            observed=Observed.from_dict(mapping(data.get("observed") or {}, "observed")),
            missing={str(k): str(v) for k, v in (data.get("missing") or {}).items()},
            artifacts={str(k): list(v) for k, v in (data.get("artifacts") or {}).items()},
        )


@dataclass
class SharedSession:
    """A session collector that several passes shared (one bpftrace attached once for
    every pass of its phase, ``lab.run.phases``): what each of those passes records."""

    collector: str
    #: the session's raw output, run-relative (script, symbols, whole output, stderr)
    directory: str
    #: how many passes and invocation cgroups it observed
    passes: int
    invocations: int
    #: wall time to attach and to stop; None until measured (the session failed to start)
    attach_s: float | None = None
    stop_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "collector": self.collector,
            "directory": self.directory,
            "passes": self.passes,
            "invocations": self.invocations,
            "attach_s": None if self.attach_s is None else round(self.attach_s, 6),
            "stop_s": None if self.stop_s is None else round(self.stop_s, 6),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SharedSession:
        return cls(
            collector=str(data["collector"]),
            directory=str(data["directory"]),
            passes=int(data["passes"]),
            invocations=int(data["invocations"]),
            attach_s=data.get("attach_s"),
            stop_s=data.get("stop_s"),
        )


@dataclass
class Pass:
    """One complete execution of a scenario (fresh state, every invocation) under one
    process collector (``none`` = untraced). Tracers change execution, so they never share
    a pass; packet capture, being passive, runs alongside any pass."""

    collector: str
    invocations: list[Invocation]
    #: receiver address and decoy address for this pass ("127.0.0.1:PORT")
    receiver_address: str
    decoy_address: str
    #: verifier check of the pre-loaded older backup, if the scenario had one
    preload_sha256: str | None = None
    error: str | None = None
    #: the source fixture: regenerate with lab.workloads.backup.fixture.source_bytes(seed, size)
    source_seed: str | None = None
    source_sha256: str | None = None
    source_size: int | None = None
    #: invocation -> SHA-256 of the new content written before it (same size, other bytes)
    source_changes: dict[int, str] = field(default_factory=dict)
    #: wall time of the whole pass as the lab saw it (set-up, every invocation, checks)
    wall_s: float = 0.0
    #: the pass did not run, and why (an earlier pass of the condition timed out)
    skipped: str | None = None
    #: the pass ran in the sandbox (False: ``--sandbox off``)
    sandboxed: bool = True
    #: the pass's network namespace, when sandboxed
    netns: str | None = None
    #: the pass ran while another pass was running (``--jobs N``, lab.run.schedule): its
    #: wall and CPU figures were measured beside it
    concurrent: bool = False
    #: the pass's tracer was a session shared with other passes (attached once for all of
    #: them); None: the pass had its own, or its tracer wraps each invocation
    session: SharedSession | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "collector": self.collector,
            "skipped": self.skipped,
            "sandboxed": self.sandboxed,
            "netns": self.netns,
            "concurrent": self.concurrent,
            "session": None if self.session is None else self.session.to_dict(),
            "receiver_address": self.receiver_address,
            "decoy_address": self.decoy_address,
            "preload_sha256": self.preload_sha256,
            "error": self.error,
            "wall_s": round(self.wall_s, 6),
            "source": {
                "seed": self.source_seed,
                "sha256": self.source_sha256,
                "size": self.source_size,
                "changed_before": {str(k): v for k, v in sorted(self.source_changes.items())},
            },
            "invocations": [i.to_dict() for i in self.invocations],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pass:
        """One ``passes[]`` record of a scenario."""
        source = mapping(data.get("source") or {}, "pass.source")
        return cls(
            collector=str(required(data, "collector", "pass")),
            invocations=[
                Invocation.from_dict(mapping(i, "invocation")) for i in data["invocations"]
            ],
            receiver_address=str(data["receiver_address"]),
            decoy_address=str(data["decoy_address"]),
            preload_sha256=data.get("preload_sha256"),
            error=data.get("error"),
            source_seed=source.get("seed"),
            source_sha256=source.get("sha256"),
            source_size=source.get("size"),
            source_changes={
                int(k): str(v) for k, v in (source.get("changed_before") or {}).items()
            },
            wall_s=float(data.get("wall_s", 0.0)),
            skipped=data.get("skipped"),
            sandboxed=bool(data.get("sandboxed", True)),
            netns=data.get("netns"),
            concurrent=bool(data.get("concurrent", False)),
            session=(
                None
                if data.get("session") is None
                else SharedSession.from_dict(mapping(data["session"], "pass.session"))
            ),
        )
