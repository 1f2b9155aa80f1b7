"""``timeline.jsonl``: every source's events on the run's one time base.

Every row has ``t_ns`` (integer nanoseconds of CLOCK_MONOTONIC, :data:`TIME_BASE`),
``source``, ``event`` and, where it belongs, ``scenario``, ``repetition``, ``pass`` and
``invocation``; rows are sorted by ``t_ns``. Each row also keeps the source's own
timestamp verbatim (``source_time``) and the clock it was read on (``clock``); a row whose
source counts epoch time (strace ``-ttt``, the capture's pcap stamps, the endpoints' and
verifier's wall clock) carries the ``offset_ns`` (realtime minus monotonic) used to convert
it. The offset is measured when the timeline opens and again whenever it is written (the
tightest of several back-to-back readings, :func:`lab.host.clock.measure_offset`);
conversion interpolates between the two, and the first row (``event: time-base``) names the
time base, both measurements and the conversion's uncertainty (the wider bracket plus the
drift between them).

    timeline = Timeline(run_dir / "timeline.jsonl")
    timeline.add("runner", "client-start", time.monotonic_ns(), scenario="baseline", ...)
    timeline.add_sightings(rows_for_invocation(...), labels)   # strace, bpftrace, packets
    timeline.flush()
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.host.clock import TIME_BASE, ClockOffset, measure_offset

#: the source clocks a :class:`Sighting` may be read on
MONOTONIC = "monotonic"
REALTIME = "realtime"
#: the first row's event
HEADER_EVENT = "time-base"
#: tie-break between sources at the same nanosecond: the causal order of one invocation
SOURCE_ORDER = {
    name: i
    for i, name in enumerate(
        (
            "runner",
            "client",
            "strace",
            "bpftrace",
            "perf",
            "packets",
            "receiver",
            "decoy",
            "verifier",
        )
    )
}


@dataclass(frozen=True)
class Sighting:
    """One event as its source stamped it: ``own_ns`` on ``clock`` (monotonic or realtime
    nanoseconds), ``own_text`` the source's timestamp as it wrote it."""

    source: str
    event: str
    clock: str
    own_ns: int
    own_text: str
    #: what the source's own clock is, in words ("strace -ttt (epoch, µs)")
    clock_name: str
    fields: dict[str, Any] = field(default_factory=dict)


class Timeline:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._rows: list[dict[str, Any]] = []
        #: epoch rows kept unconverted until the file is written (the end offset is known)
        self._epoch: list[tuple[int, dict[str, Any]]] = []
        start: ClockOffset | None = None
        # Several runners may share a run directory (an evaluation's instrument check, then
        # the candidate): keep what an earlier one wrote, on the same measured base.
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                if row.get("event") == HEADER_EVENT:
                    start = ClockOffset.from_dict(row["realtime_offset"]["start"])
                else:
                    self._rows.append(row)
        self.start = start if start is not None else measure_offset()
        self.end = self.start

    def add(self, source: str, event: str, t_ns: int, **fields: Any) -> None:
        """A row whose time was read on the time base itself (the lab's own process)."""
        row = {"t_ns": t_ns, "source": source, "event": event, **fields}
        row.setdefault("clock", f"{TIME_BASE} (lab process)")
        with self._lock:
            self._rows.append(row)

    def add_realtime(self, source: str, event: str, epoch_ns: int, **fields: Any) -> None:
        """A row stamped on CLOCK_REALTIME (nanoseconds since the epoch)."""
        row = {"source": source, "event": event, **fields}
        with self._lock:
            self._epoch.append((epoch_ns, row))

    def add_sightings(self, sightings: Iterable[Sighting], labels: dict[str, Any]) -> None:
        for s in sightings:
            extra = {
                **labels,
                **s.fields,
                "clock": s.clock_name,
                "source_time": s.own_text,
            }
            if s.clock == MONOTONIC:
                self.add(s.source, s.event, s.own_ns, **extra)
            else:
                self.add_realtime(s.source, s.event, s.own_ns, **extra)

    def offset_at(self, epoch_ns: int) -> int:
        """Realtime minus monotonic at ``epoch_ns``: interpolated between the two
        measurements, held at either end outside them."""
        a, b = self.start, self.end
        if b.at_ns <= a.at_ns:
            return a.offset_ns
        mono = epoch_ns - a.offset_ns
        frac = min(1.0, max(0.0, (mono - a.at_ns) / (b.at_ns - a.at_ns)))
        return a.offset_ns + round(frac * (b.offset_ns - a.offset_ns))

    @property
    def uncertainty_ns(self) -> int:
        drift = abs(self.end.offset_ns - self.start.offset_ns)
        return max(self.start.uncertainty_ns, self.end.uncertainty_ns) + drift

    def header(self, first_ns: int) -> dict[str, Any]:
        return {
            "t_ns": first_ns,
            "source": "runner",
            "event": HEADER_EVENT,
            "time_base": TIME_BASE,
            "realtime_offset": {"start": self.start.to_dict(), "end": self.end.to_dict()},
            "uncertainty_ns": self.uncertainty_ns,
            "clock": f"{TIME_BASE} (lab process)",
        }

    def rows(self) -> list[dict[str, Any]]:
        """Every row on the time base, sorted, the header first."""
        with self._lock:
            converted = []
            for epoch_ns, row in self._epoch:
                offset = self.offset_at(epoch_ns)
                converted.append({"t_ns": epoch_ns - offset, **row, "offset_ns": offset})
            rows = sorted(
                self._rows + converted,
                key=lambda r: (r["t_ns"], SOURCE_ORDER.get(r["source"], 99), r["event"]),
            )
        first = min([self.start.at_ns] + [r["t_ns"] for r in rows[:1]])
        return [self.header(first), *rows]

    def flush(self) -> None:
        """Measure the offset again and write the file."""
        self.end = measure_offset()
        rows = self.rows()
        with self._lock, open(self.path, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True) + "\n")


#: the endpoints' record events the timeline shows
ENDPOINT_EVENTS = frozenset({"connect", "request", "answer", "decision", "payload", "preloaded"})


def endpoint_rows(
    timeline: Timeline, records: Iterable[dict[str, Any]], labels: dict[str, Any]
) -> None:
    """The receiver's and the decoy's records, on their own ``mono_ns`` (the time base),
    their wall-clock ``ts`` kept beside."""
    for rec in records:
        if rec["event"] not in ENDPOINT_EVENTS:
            continue
        fields = {k: v for k, v in rec.items() if k not in ("ts", "clock", "source", "event")}
        timeline.add(
            rec["source"],
            rec["event"],
            int(fields.pop("mono_ns")),
            **labels,
            **fields,
            clock=f"{TIME_BASE} ({rec['source']} thread, mono_ns)",
            source_time=rec["ts"],
        )


def client_rows(
    timeline: Timeline,
    lines: Iterable[tuple[int, int, dict[str, Any]]],
    exited_ns: int,
    claim: Any,
    labels: dict[str, Any],
    index: int,
) -> None:
    """The client's event lines at the time the lab read each one, and its exit."""
    for line_no, read_ns, claimed in lines:
        timeline.add(
            "client",
            "claim",
            read_ns,
            **labels,
            invocation=index,
            line=line_no,
            claim=claimed,
            clock=f"{TIME_BASE} (lab, as it read the stdout line)",
        )
    timeline.add(
        "client",
        "exit",
        exited_ns,
        **labels,
        invocation=index,
        exit_status=claim.exit_status,
        timed_out=claim.timed_out,
        clock=f"{TIME_BASE} (lab, when the sandbox reported the exit)",
    )


def read_time_base(path: Path) -> dict[str, Any] | None:
    """The time base a written ``timeline.jsonl`` names in its first row (None if absent)."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = json.loads(fh.readline() or "null")
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(first, dict) or first.get("event") != HEADER_EVENT:
        return None
    return {
        "time_base": first.get("time_base"),
        "realtime_offset": first.get("realtime_offset"),
        "uncertainty_ns": first.get("uncertainty_ns"),
        "file": path.name,
    }
