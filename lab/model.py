"""The results model: what a run observed and how it was judged. No I/O lives here.

Collectors, the receiver and the verifier *produce* these records; ``lab.judge.contract`` *judges*
them; presenters (``lab.reports``) *draw* them. ``RunResult.to_dict()`` is exactly what goes
into ``results.json`` (``lab/schemas/results.schema.json``).

    run = RunResult(run_id="20261129T160000Z-ab12cd", started_at=..., ...)
    run.scenarios.append(ScenarioResult(name="baseline", repetition=1, ...))
    json.dumps(run.to_dict(), sort_keys=True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from lab.campaign.model import CampaignRecord
from lab.evaluate.model import Evaluation

SCHEMA_VERSION = 1

Outcome = Literal["pass", "fail", "not-observed", "not-exercised"]
#: ``not-observed``: the evidence the clause needs was unavailable (the reason says which);
#: ``not-exercised``: the scenario never created the situation the clause is about (no
#: injected interruption for C4, no mismatching payload for C5, no unchanged second
#: invocation for C2); what could still be checked is in the reason, and a violation of it
#: is a ``fail``
OUTCOMES: tuple[str, ...] = ("pass", "fail", "not-observed", "not-exercised")
CLAUSES: tuple[str, ...] = ("C1", "C2", "C3", "C4", "C5", "C6")

CLAUSE_TITLES: dict[str, str] = {
    "C1": "content: the saved backup matches the source",
    "C2": "no redundant upload: an unchanged second invocation sends no upload payload",
    "C3": "destination: the client contacts only the configured receiver",
    "C4": "recovery: after an injected interruption, committed within 3 upload attempts",
    "C5": "integrity: a payload that does not match its digest is rejected before commit",
    "C6": "truthful claim: exit status and completion event agree with the verified outcome",
}

#: Observers whose findings can be expected in a scenario file. ``client`` is the client's
#: own claim (exit status, events); everything else is independent of the client.
OBSERVERS: tuple[str, ...] = (
    "client",
    "receiver",
    "decoy",
    "verifier",
    "strace",
    "bpftrace",
    "perf",
    "packets",
)
PROCESS_COLLECTORS: tuple[str, ...] = ("strace", "bpftrace", "perf")


@dataclass
class ObserverStatus:
    """Whether an observer could run on this machine, and why not."""

    available: bool
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"available": self.available, "reason": self.reason, "detail": self.detail}


@dataclass
class Verdict:
    expected: Outcome | None
    observed: Outcome
    evidence: list[str]
    #: one sentence: why this outcome, from which records
    reason: str

    @property
    def agrees(self) -> bool | None:
        """True/False when both sides are known; None when not observed or not expected."""
        if self.expected is None or (
            self.observed == "not-observed" and self.expected != "not-observed"
        ):
            return None
        return self.expected == self.observed

    def to_dict(self) -> dict[str, Any]:
        return {
            "expected": self.expected,
            "observed": self.observed,
            "evidence": list(self.evidence),
            "reason": self.reason,
        }


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


@dataclass
class Lingering:
    """A process still in the invocation's cgroup when the client's main process exited."""

    pid: int
    comm: str
    argv: list[str]
    #: seconds it had been running when found
    age_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "comm": self.comm,
            "argv": list(self.argv),
            "age_s": None if self.age_s is None else round(self.age_s, 3),
        }


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
    #: CPU time, memory and pids peaks, pids.max hits, OOM kills (what the kernel reports)
    stats: dict[str, Any] = field(default_factory=dict)
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
            "stats": dict(self.stats),
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
    #: observer name -> parsed summary (only observers that ran for this invocation)
    observed: dict[str, dict[str, Any]] = field(default_factory=dict)
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
            "observed": {k: self.observed[k] for k in sorted(self.observed)},
            "missing": {k: self.missing[k] for k in sorted(self.missing)},
            "artifacts": {k: sorted(v) for k, v in sorted(self.artifacts.items())},
        }


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
    #: the source fixture: regenerate with lab.run.fixture.source_bytes(seed, size)
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "collector": self.collector,
            "skipped": self.skipped,
            "sandboxed": self.sandboxed,
            "netns": self.netns,
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


@dataclass
class Finding:
    """One calibration expectation and what was observed for it."""

    observer: str
    invocation: int | None
    key: str
    expected: Any
    observed: Any
    #: True met, False not met, None not observed (the reason says why)
    met: bool | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "observer": self.observer,
            "invocation": self.invocation,
            "key": self.key,
            "expected": self.expected,
            "observed": self.observed,
            "met": self.met,
            "reason": self.reason,
        }


@dataclass
class Calibration:
    met: int = 0
    total: int = 0
    not_met: int = 0
    not_observed: int = 0

    @classmethod
    def of(cls, findings: list[Finding], verdicts: list[Verdict]) -> Calibration:
        cal = cls()
        for agrees in [f.met for f in findings] + [v.agrees for v in verdicts]:
            cal.total += 1
            if agrees is True:
                cal.met += 1
            elif agrees is False:
                cal.not_met += 1
            else:
                cal.not_observed += 1
        return cal

    def __add__(self, other: Calibration) -> Calibration:
        return Calibration(
            self.met + other.met,
            self.total + other.total,
            self.not_met + other.not_met,
            self.not_observed + other.not_observed,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "met": self.met,
            "total": self.total,
            "not_met": self.not_met,
            "not_observed": self.not_observed,
        }


@dataclass(frozen=True)
class Overhead:
    """Traced ÷ untraced client time for one process collector in one scenario, summed over
    the invocations both passes ran; None where either side was not recorded. The traced
    side is the wrapped command: the tracer's start-up, attach, teardown and own CPU count."""

    collector: str
    wall_ratio: float | None
    cpu_ratio: float | None
    untraced_wall_s: float
    traced_wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "collector": self.collector,
            "wall_ratio": None if self.wall_ratio is None else round(self.wall_ratio, 4),
            "cpu_ratio": None if self.cpu_ratio is None else round(self.cpu_ratio, 4),
            "untraced_wall_s": round(self.untraced_wall_s, 6),
            "traced_wall_s": round(self.traced_wall_s, 6),
        }


@dataclass
class ScenarioResult:
    name: str
    repetition: int
    description: str
    scenario_file: str
    passes: list[Pass]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    #: wall time of the whole scenario (all passes) as the lab saw it
    wall_s: float = 0.0

    @property
    def primary(self) -> Pass | None:
        """The pass whose receiver, verifier and client records head the report: the
        untraced pass when there was one, else the first."""
        for p in self.passes:
            if p.collector == "none":
                return p
        return self.passes[0] if self.passes else None

    @property
    def calibration(self) -> Calibration:
        return Calibration.of(self.findings, list(self.verdicts.values()))

    def merged_invocations(self) -> list[dict[str, Any]]:
        """The brief's per-invocation view: the primary pass's records, with ``observed``
        merged from every pass (each observer's summary comes from the pass it ran in)."""
        primary = self.primary
        if primary is None:
            return []
        rows: list[dict[str, Any]] = []
        for inv in primary.invocations:
            row = inv.to_dict()
            observed: dict[str, Any] = {}
            missing: dict[str, str] = {}
            artifacts: dict[str, list[str]] = {}
            for p in self.passes:
                for other in p.invocations:
                    if other.index != inv.index:
                        continue
                    for name, summary in other.observed.items():
                        observed.setdefault(name, summary)
                    for name, why in other.missing.items():
                        missing.setdefault(name, why)
                    for name, paths in other.artifacts.items():
                        artifacts.setdefault(name, []).extend(paths)
            for p in self.passes:
                if p.error and p.collector not in observed:
                    missing.setdefault(p.collector, p.error)
            for name in observed:
                missing.pop(name, None)
            row["observed"] = {k: observed[k] for k in sorted(observed)}
            row["missing"] = {k: missing[k] for k in sorted(missing)}
            row["artifacts"] = {k: sorted(set(v)) for k, v in sorted(artifacts.items())}
            rows.append(row)
        return rows

    def overhead(self) -> list[Overhead]:
        """Per process collector: the traced pass's client wall and CPU time divided by the
        untraced (``none``) pass's, over the invocation indices both passes hold. A pass
        whose tracer failed measured nothing and is skipped."""
        untraced = next((p for p in self.passes if p.collector == "none"), None)
        if untraced is None:
            return []
        base = {inv.index: inv.claim for inv in untraced.invocations}
        result: list[Overhead] = []
        for p in self.passes:
            if p.collector not in PROCESS_COLLECTORS or p.error is not None:
                continue
            pairs = [(base[i.index], i.claim) for i in p.invocations if i.index in base]
            if not pairs:
                continue
            u_wall = sum(u.wall_s for u, _ in pairs)
            t_wall = sum(t.wall_s for _, t in pairs)
            cpu_ratio: float | None = None
            if all(u.cpu_s is not None and t.cpu_s is not None for u, t in pairs):
                u_cpu = sum(u.cpu_s or 0.0 for u, _ in pairs)
                t_cpu = sum(t.cpu_s or 0.0 for _, t in pairs)
                cpu_ratio = t_cpu / u_cpu if u_cpu > 0 else None
            wall_ratio = t_wall / u_wall if u_wall > 0 else None
            result.append(Overhead(p.collector, wall_ratio, cpu_ratio, u_wall, t_wall))
        return result

    def backup(self) -> dict[str, Any]:
        primary = self.primary
        if primary is None or not primary.invocations:
            return {"exists": False, "sha256": None, "matches_source": False}
        last = primary.invocations[-1].verifier
        return {
            "exists": last.backup_exists,
            "sha256": last.backup_sha256,
            "matches_source": last.matches_source,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repetition": self.repetition,
            "description": self.description,
            "scenario_file": self.scenario_file,
            "error": self.error,
            "wall_s": round(self.wall_s, 6),
            "verdicts": {c: self.verdicts[c].to_dict() for c in CLAUSES if c in self.verdicts},
            "backup": self.backup(),
            "invocations": self.merged_invocations(),
            "findings": [f.to_dict() for f in self.findings],
            "calibration": self.calibration.to_dict(),
            "tracing_overhead": [o.to_dict() for o in self.overhead()],
            "passes": [p.to_dict() for p in self.passes],
        }


@dataclass
class RunResult:
    run_id: str
    started_at: str
    finished_at: str
    options: dict[str, Any]
    observers: dict[str, ObserverStatus]
    environment: dict[str, Any]
    scenarios: list[ScenarioResult] = field(default_factory=list)
    #: clause-level and timing aggregates over repetitions (``lab.judge.aggregate``)
    aggregate: list[dict[str, Any]] = field(default_factory=list)
    #: set by candidate evaluation (``lab.evaluate.judge``)
    evaluation: Evaluation | None = None
    #: set by an agent campaign (``lab.campaign.conduct``)
    campaign: CampaignRecord | None = None
    #: signing identity, filled when the archive is written
    signing: dict[str, Any] = field(default_factory=dict)
    #: a shard's run (``--shard I/N``): index, count, units, the frozen run id (lab.run.shard)
    shard: dict[str, Any] | None = None
    #: a merged run (``lab merge``): one record per shard archive it was made of
    shards: list[dict[str, Any]] = field(default_factory=list)

    @property
    def calibration(self) -> Calibration:
        total = Calibration()
        for s in self.scenarios:
            total = total + s.calibration
        return total

    @property
    def executed(self) -> bool:
        return all(s.error is None for s in self.scenarios)

    @property
    def calibrated(self) -> bool:
        """Every scenario executed and no observation disagrees with its expectation."""
        return self.executed and self.calibration.not_met == 0

    def to_dict(self) -> dict[str, Any]:
        sharding: dict[str, Any] = {"shard": self.shard} if self.shard is not None else {}
        if self.shards:
            sharding["shards"] = self.shards
        if self.campaign is not None:
            sharding["campaign"] = self.campaign.to_dict()
        return {
            **sharding,
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "options": self.options,
            "environment": self.environment,
            "calibration": self.calibration.to_dict(),
            "observers": {k: v.to_dict() for k, v in sorted(self.observers.items())},
            "scenarios": [s.to_dict() for s in self.scenarios],
            "aggregate": self.aggregate,
            "evaluation": None if self.evaluation is None else self.evaluation.to_dict(),
            "signing": self.signing,
        }
