"""The endpoints' records: JSON lines streamed to a file, and per-invocation tallies.

Every record goes to disk as it happens; memory keeps only a :class:`Tally` per invocation
(counters, and the short lists a summary carries), so a flood of connections costs disk,
not memory. ``summarize`` folds the same tally over records read back, so the live summary
and the one computed from the file cannot disagree.

    log = RecordLog(path)
    log.write({"invocation": 1, "event": "connect", "conn": 1, ...})
    log.receiver_summary(1, held_at_start=False)
    summarize(list(log.read()), invocation=1, held_at_start=False)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lab.model import DecoySummary, ReceiverSummary

Record = dict[str, Any]

#: decisions that are not a rejection of the upload's content by the receiver
NOT_REJECTED = ("committed", "dropped-by-fault")


@dataclass
class Tally:
    """What the summaries need from one invocation's records, accumulated one by one."""

    connections: int = 0
    payload_bytes: int = 0
    upload_attempts: int = 0
    have_queries: int = 0
    protocol_errors: int = 0
    decisions: list[str] = field(default_factory=list)
    have_answers: list[str] = field(default_factory=list)
    #: peers are kept only where a summary names them (the decoy's): one per connection
    track_peers: bool = False
    peers: set[str] = field(default_factory=set)
    bytes_received: int = 0
    #: connections that asked HAVE and are still open (their answer is a HAVE answer)
    _asking: set[Any] = field(default_factory=set)

    def add(self, row: Record) -> None:
        event = row.get("event")
        if event == "connect":
            self.connections += 1
            if self.track_peers:
                self.peers.add(str(row.get("peer")))
        elif event == "payload":
            self.payload_bytes += int(row["bytes"])
        elif event == "received":
            self.bytes_received += int(row["bytes"])
        elif event == "request":
            if row.get("verb") == "PUT":
                self.upload_attempts += 1
            elif row.get("verb") == "HAVE":
                self.have_queries += 1
                self._asking.add(row.get("conn"))
        elif event == "answer":
            if row.get("conn") in self._asking and row.get("answer") in ("YES", "NO"):
                self.have_answers.append(str(row["answer"]))
        elif event == "decision":
            self.decisions.append(str(row["decision"]))
        elif event == "protocol-error":
            self.protocol_errors += 1
        elif event == "close":
            self._asking.discard(row.get("conn"))

    def receiver_summary(self, *, held_at_start: bool) -> ReceiverSummary:
        return ReceiverSummary(
            connections=self.connections,
            payload_bytes_consumed=self.payload_bytes,
            upload_attempts=self.upload_attempts,
            committed="committed" in self.decisions,
            rejected_uploads=sum(1 for d in self.decisions if d not in NOT_REJECTED),
            dropped_transfers=self.decisions.count("dropped-by-fault"),
            have_queries=self.have_queries,
            have_answers=list(self.have_answers),
            held_source_at_start=held_at_start,
            decisions=list(self.decisions),
            protocol_errors=self.protocol_errors,
        )

    def decoy_summary(self) -> DecoySummary:
        return DecoySummary(
            connections=self.connections,
            peers=sorted(self.peers),
            bytes_received=self.bytes_received,
        )


def _fold(records: Iterable[Record], invocation: int) -> Tally:
    tally = Tally(track_peers=True)
    for row in records:
        if row.get("invocation") == invocation:
            tally.add(row)
    return tally


def summarize(
    records: Iterable[Record], *, invocation: int, held_at_start: bool
) -> ReceiverSummary:
    return _fold(records, invocation).receiver_summary(held_at_start=held_at_start)


def summarize_decoy(records: Iterable[Record], *, invocation: int) -> DecoySummary:
    return _fold(records, invocation).decoy_summary()


class RecordLog:
    """An append-only JSON-lines file, written by any thread, with live tallies."""

    def __init__(self, path: Path, *, track_peers: bool = False) -> None:
        self.path = path
        self.track_peers = track_peers
        self._lock = threading.Lock()
        self._tallies: dict[int, Tally] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] | None = open(path, "w", encoding="utf-8")  # noqa: SIM115

    def write(self, row: Record) -> None:
        line = json.dumps(row, sort_keys=True) + "\n"
        with self._lock:
            if self._fh is None:  # records after the endpoint stopped (the runner's notes)
                self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            self._fh.write(line)
            self._fh.flush()  # readers see whole lines as soon as the record exists
            invocation = int(row.get("invocation", 0))
            if invocation not in self._tallies:
                self._tallies[invocation] = Tally(track_peers=self.track_peers)
            self._tallies[invocation].add(row)

    def receiver_summary(self, invocation: int, *, held_at_start: bool) -> ReceiverSummary:
        with self._lock:
            tally = self._tallies.get(invocation) or Tally()
            return tally.receiver_summary(held_at_start=held_at_start)

    def decoy_summary(self, invocation: int) -> DecoySummary:
        with self._lock:
            return (self._tallies.get(invocation) or Tally()).decoy_summary()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def read(self, invocation: int | None = None) -> Iterator[Record]:
        """The records on disk, in order (those of one invocation when it is given)."""
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    break  # a line still being written
                row: Record = json.loads(line)
                if invocation is None or row.get("invocation") == invocation:
                    yield row
