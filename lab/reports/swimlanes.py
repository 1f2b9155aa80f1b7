"""What a swimlane chart shows: one invocation's events from every source on the run's one
clock (``timeline.jsonl``'s ``t_ns``), a lane per kind of observer.

    lanes = swimlanes(rows)                 # rows: timeline.jsonl, one dict per line
    for lane in lanes_of(lanes, "baseline", 1):
        lane.title, lane.span_ns, lane.lanes  # [("claims", (Mark, ...), omitted), ...]

Pure functions of the timeline's rows: the HTML report draws them as inline SVG and the PDF
as a drawing. A row without ``t_ns`` (a timeline written before the one clock), or without
its scenario, repetition, pass and invocation, belongs to no invocation's chart and is left
out; a lane keeps at most ``MARKS_PER_LANE`` marks and says how many it left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: lane title -> the timeline sources drawn in it, top to bottom in causal order
LANES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("runner", ("runner",)),
    ("claims", ("client",)),
    ("syscalls", ("strace", "bpftrace")),
    ("cpu", ("perf",)),
    ("packets", ("packets",)),
    ("receiver", ("receiver",)),
    ("decoy", ("decoy",)),
    ("verifier", ("verifier",)),
)
#: the lanes drawn even when empty: an empty lane is itself evidence (nothing seen there)
ALWAYS = ("claims", "syscalls", "packets", "receiver", "decoy", "verifier")
MARKS_PER_LANE = 150
_LANE_OF = {source: lane for lane, sources in LANES for source in sources}


@dataclass(frozen=True)
class Mark:
    t_ns: int
    source: str
    event: str


@dataclass(frozen=True)
class Swimlane:
    scenario: str
    repetition: int
    pass_name: str
    invocation: int
    start_ns: int
    end_ns: int
    #: (lane title, its marks in time order, marks left out)
    lanes: tuple[tuple[str, tuple[Mark, ...], int], ...]

    @property
    def title(self) -> str:
        return (
            f"{self.scenario} r{self.repetition}, pass {self.pass_name}, "
            f"invocation {self.invocation}"
        )

    @property
    def span_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 1)


def _key(row: Mapping[str, Any]) -> tuple[str, int, str, int] | None:
    t, scenario, rep = row.get("t_ns"), row.get("scenario"), row.get("repetition")
    pass_name, inv = row.get("pass"), row.get("invocation")
    if not isinstance(t, int) or isinstance(t, bool) or not isinstance(scenario, str):
        return None
    if not isinstance(rep, int) or not isinstance(pass_name, str) or not isinstance(inv, int):
        return None
    if row.get("source") not in _LANE_OF:
        return None
    return scenario, rep, pass_name, inv


def swimlanes(rows: Iterable[Mapping[str, Any]]) -> list[Swimlane]:
    """One chart per invocation found in ``rows``, ordered by scenario, repetition, pass and
    invocation."""
    grouped: dict[tuple[str, int, str, int], list[Mark]] = {}
    for row in rows:
        key = _key(row)
        if key is not None:
            mark = Mark(int(row["t_ns"]), str(row["source"]), str(row.get("event", "")))
            grouped.setdefault(key, []).append(mark)
    out = []
    for key in sorted(grouped):
        marks = sorted(grouped[key], key=lambda m: m.t_ns)
        lanes = []
        for title, _sources in LANES:
            mine = [m for m in marks if _LANE_OF[m.source] == title]
            if mine or title in ALWAYS:
                kept = tuple(mine[:MARKS_PER_LANE])
                lanes.append((title, kept, len(mine) - len(kept)))
        out.append(
            Swimlane(*key, start_ns=marks[0].t_ns, end_ns=marks[-1].t_ns, lanes=tuple(lanes))
        )
    return out


def lanes_of(charts: list[Swimlane], scenario: str, repetition: int) -> list[Swimlane]:
    return [c for c in charts if c.scenario == scenario and c.repetition == repetition]


def fmt_offset(ns: int) -> str:
    """A time since the invocation's first event: "0 ms", "12.4 ms", "1.203 s"."""
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.1f} ms" if ns else "0 ms"
    return f"{ns / 1e9:.3f} s"


def timeline_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of ``timeline.jsonl`` the swimlanes are drawn from (a line that is
    not a JSON object is skipped: the file itself is archived whole)."""
    rows: list[dict[str, Any]] = []
    if not path.is_file():
        return rows
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows
