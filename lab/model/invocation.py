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

from lab.model.observed import Observed
from lab.model.sandbox import CgroupStats, ProcessInfo


@dataclass
class VerifierCheck:
    """The independent backup check: the saved file on disk against the fixture digest
    computed before the client started, and against the receiver's own commit record."""

    backup_exists: bool
    #: the saved backup's SHA-256 equals the fixture's (computed before the client ran)
    matches_source: bool
    backup_sha256: str | None
    #: the fixture's digest, computed before the client started (never re-read from a file
    #: the client could have changed)
    source_sha256: str
    backup_size: int | None
    checked_at: str
    #: the source copy on disk still has the fixture's digest after the invocation
    source_unchanged: bool = True
    #: the digest the receiver's own records say it committed (or pre-loaded) last
    receiver_digest: str | None = None
    #: the file on disk is what the receiver committed (False: the store was written
    #: outside the protocol, or a committed backup vanished)
    store_consistent: bool = True

    @property
    def verified(self) -> bool:
        """File on disk, receiver's commit record and fixture digest all agree."""
        return (
            self.backup_exists
            and self.matches_source
            and self.store_consistent
            and self.source_unchanged
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "backup_exists": self.backup_exists,
            "matches_source": self.matches_source,
            "backup_sha256": self.backup_sha256,
            "source_sha256": self.source_sha256,
            "backup_size": self.backup_size,
            "checked_at": self.checked_at,
            "source_unchanged": self.source_unchanged,
            "receiver_digest": self.receiver_digest,
            "store_consistent": self.store_consistent,
            "verified": self.verified,
        }


@dataclass
class ReceiverSummary:
    """What the receiver's own records say about one invocation."""

    connections: int
    payload_bytes_consumed: int
    upload_attempts: int
    committed: bool
    rejected_uploads: int
    dropped_transfers: int
    have_queries: int
    #: what the receiver answered to HAVE for the source digest, in order ("YES"/"NO")
    have_answers: list[str]
    #: whether the receiver already held the source's digest when the invocation began
    held_source_at_start: bool
    #: PUT decisions in order: "committed", "digest-mismatch", "dropped-by-fault", ...
    decisions: list[str]
    protocol_errors: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "connections": self.connections,
            "payload_bytes_consumed": self.payload_bytes_consumed,
            "upload_attempts": self.upload_attempts,
            "committed": self.committed,
            "rejected_uploads": self.rejected_uploads,
            "dropped_transfers": self.dropped_transfers,
            "have_queries": self.have_queries,
            "have_answers": list(self.have_answers),
            "held_source_at_start": self.held_source_at_start,
            "decisions": list(self.decisions),
            "protocol_errors": self.protocol_errors,
        }


@dataclass
class DecoySummary:
    connections: int
    peers: list[str]
    bytes_received: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "connections": self.connections,
            "peers": list(self.peers),
            "bytes_received": self.bytes_received,
        }


@dataclass
class ClientClaim:
    """What the client said: exit status, completion event, its JSON event lines (the first
    and last ``EVENTS_KEPT`` of them; ``event_count`` counts them all)."""

    exit_status: int | None
    claimed_success: bool
    completion: dict[str, Any] | None
    events: list[dict[str, Any]]
    #: stdout lines that were not JSON objects (kept, never silently dropped)
    unparsed_lines: int
    timed_out: bool
    killed_by_signal: int | None
    wall_s: float
    cpu_s: float | None
    #: JSON event lines in the kept output (may exceed len(events))
    event_count: int = 0
    #: stdout lines the lab did not keep (a flood); their content is unknown
    omitted_lines: int = 0

    @property
    def contract_violations(self) -> list[str]:
        """Ways the output breaks client contract v1 (docs/client-contract.md)."""
        problems: list[str] = []
        if self.completion is None:
            problems.append("no final completion event")
        else:
            status = self.completion.get("status")
            if status not in ("ok", "failed"):
                problems.append(f"completion status {status!r} is neither 'ok' nor 'failed'")
            elif status == "failed" and not isinstance(self.completion.get("reason"), str):
                problems.append("failed completion event without a reason")
            if self.exit_status is not None and (status == "ok") != (self.exit_status == 0):
                problems.append("exit status and completion event disagree")
        if self.unparsed_lines:
            problems.append(f"{self.unparsed_lines} stdout line(s) are not JSON objects")
        if self.omitted_lines:
            problems.append(f"{self.omitted_lines} stdout line(s) beyond the lab's bound")
        return problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_status": self.exit_status,
            "claimed_success": self.claimed_success,
            "completion": self.completion,
            "event_count": self.event_count or len(self.events),
            "omitted_lines": self.omitted_lines,
            "unparsed_lines": self.unparsed_lines,
            "timed_out": self.timed_out,
            "killed_by_signal": self.killed_by_signal,
            "wall_s": round(self.wall_s, 6),
            "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 6),
            "contract_violations": self.contract_violations,
        }


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

    def to_dict(self) -> dict[str, Any]:
        return {
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
