"""What the client, the endpoints and the independent verifier say of one invocation: the
client's own claim (``ClientClaim``), the receiver's and the decoy's summaries
(``ReceiverSummary``, ``DecoySummary``) and the backup check (``VerifierCheck``). Each
``to_dict()`` is its record in ``results.json`` and ``from_dict()`` reads it back.

    VerifierCheck.from_dict(check.to_dict()) == check
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerifierCheck:
        """An invocation's ``verifier`` record."""
        return cls(
            backup_exists=bool(data["backup_exists"]),
            matches_source=bool(data["matches_source"]),
            backup_sha256=data.get("backup_sha256"),
            source_sha256=str(data["source_sha256"]),
            backup_size=data.get("backup_size"),
            checked_at=str(data["checked_at"]),
            source_unchanged=bool(data.get("source_unchanged", True)),
            receiver_digest=data.get("receiver_digest"),
            store_consistent=bool(data.get("store_consistent", True)),
        )


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReceiverSummary:
        """An invocation's ``receiver`` record."""
        return cls(
            connections=int(data["connections"]),
            payload_bytes_consumed=int(data["payload_bytes_consumed"]),
            upload_attempts=int(data["upload_attempts"]),
            committed=bool(data["committed"]),
            rejected_uploads=int(data["rejected_uploads"]),
            dropped_transfers=int(data["dropped_transfers"]),
            have_queries=int(data["have_queries"]),
            have_answers=list(data["have_answers"]),
            held_source_at_start=bool(data["held_source_at_start"]),
            decisions=list(data["decisions"]),
            protocol_errors=int(data["protocol_errors"]),
        )


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecoySummary:
        """An invocation's ``decoy`` record."""
        return cls(
            connections=int(data["connections"]),
            peers=list(data["peers"]),
            bytes_received=int(data["bytes_received"]),
        )


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClientClaim:
        """An invocation's ``client`` record (its event lines are not in results.json:
        ``events`` is empty, ``event_count`` counts them)."""
        return cls(
            exit_status=data["exit_status"],
            claimed_success=bool(data["claimed_success"]),
            completion=data.get("completion"),
            events=[],
            unparsed_lines=int(data.get("unparsed_lines", 0)),
            timed_out=bool(data.get("timed_out", False)),
            killed_by_signal=data.get("killed_by_signal"),
            wall_s=float(data["wall_s"]),
            cpu_s=None if data.get("cpu_s") is None else float(data["cpu_s"]),
            event_count=int(data.get("event_count", 0)),
            omitted_lines=int(data.get("omitted_lines", 0)),
        )
