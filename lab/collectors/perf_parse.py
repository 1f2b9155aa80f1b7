"""perf's text outputs parsed, pure functions (no process is run here): ``perf report
--children --stdio --sort symbol,dso`` into event sections and symbol rows, and ``perf
report --stats`` into sample and lost-sample counts. ``lab.collectors.perf`` runs the tools
and summarises what these return; captured outputs are parsed in tests/unit/collectors.

    report = parse_report(Path("perf-report.txt").read_text())
    report.sections[0].event, report.rows[0].symbol
    stats = parse_stats(Path("perf-stats.txt").read_text(), "cpu-clock")
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lab.model.observed import PerfSymbol


class PerfParseError(Exception):
    """perf's output lacks what the summary needs; the message is one sentence."""


# ---------------------------------------------------------------------------------------
# Parsers (pure)

#: "# Samples: 476  of event 'cpu-clock'" or "# Samples: 8K of event 'ibs_op//'"
_SAMPLES_RE = re.compile(
    r"^# Samples: (?P<n>\d+(?:\.\d+)?)(?P<unit>[KMG]?)\s+of event '(?P<ev>.*)'"
)
#: "# Total Lost Samples: 1463": a different line, never the sample count
_LOST_RE = re.compile(r"^# Total Lost Samples: (?P<n>\d+)\s*$")
_EVENT_COUNT_RE = re.compile(r"^# Event count \(approx\.\): (?P<n>\d+)\s*$")
#: a top-level entry of ``perf report --children --sort symbol,dso``:
#: "    99.79%    98.32%  [.] busy_wait     spin    -      -"
_ENTRY_RE = re.compile(
    r"^\s+(?P<children>\d+\.\d+)%\s+(?P<self>\d+\.\d+)%\s+\[(?P<level>.)\]\s(?P<rest>.*)$"
)
_UNITS = {"": 1, "K": 1_000, "M": 1_000_000, "G": 1_000_000_000}


@dataclass
class EventSection:
    event: str
    #: as printed; perf abbreviates large counts ("8K")
    samples_text: str
    #: exact only when ``samples_exact``
    samples: int
    samples_exact: bool
    event_count: int | None = None


@dataclass
class SymbolRow:
    symbol: str
    dso: str
    inclusive_pct: float
    self_pct: float
    #: "." user space, "k" kernel, "g"/"u"/"H" other perf levels
    level: str

    def kept(self) -> PerfSymbol:
        """What the summary keeps of the row (perf's level is not kept)."""
        return PerfSymbol(self.symbol, self.dso, self.inclusive_pct, self.self_pct)


@dataclass
class ParsedReport:
    lost_samples: int | None
    sections: list[EventSection] = field(default_factory=list)
    rows: list[SymbolRow] = field(default_factory=list)


@dataclass
class PerfStats:
    """Exact counts from ``perf report --stats``, for one event."""

    samples: int | None
    lost_samples: int | None
    #: PERF_RECORD_LOST records (lost ring-buffer chunks), from the aggregated table
    lost_chunks: int | None
    #: the aggregated table's TOTAL (None when perf could not read the file at all)
    total_events: int | None
    #: the aggregated table's LOST_SAMPLES *records* (not samples)
    lost_sample_records: int | None


def parse_report(text: str) -> ParsedReport:
    """Parse the header lines and top-level entries of ``perf report --children --stdio``."""
    report = ParsedReport(lost_samples=None)
    for line in text.splitlines():
        if line.startswith("#"):
            if (m := _LOST_RE.match(line)) is not None:
                # Several events give several headers; lost samples add up.
                report.lost_samples = (report.lost_samples or 0) + int(m.group("n"))
            elif (m := _SAMPLES_RE.match(line)) is not None:
                unit = m.group("unit")
                value = float(m.group("n")) * _UNITS[unit]
                report.sections.append(
                    EventSection(
                        event=m.group("ev"),
                        samples_text=m.group("n") + unit,
                        samples=int(value),
                        samples_exact=unit == "",
                    )
                )
            elif (m := _EVENT_COUNT_RE.match(line)) is not None and report.sections:
                report.sections[-1].event_count = int(m.group("n"))
            continue
        m = _ENTRY_RE.match(line)
        if m is None:
            continue  # call-graph lines ("|", "---", "--99.60%--"), blank lines
        # Columns are separated by two or more spaces; a symbol may hold single spaces
        # ("__libc_start_main_impl (inlined)").
        columns = re.split(r"\s{2,}", m.group("rest").strip())
        if len(columns) < 2:
            continue
        report.rows.append(
            SymbolRow(
                symbol=columns[0],
                dso=columns[1],
                inclusive_pct=float(m.group("children")),
                self_pct=float(m.group("self")),
                level=m.group("level"),
            )
        )
    return report


def parse_stats(text: str, event: str | None = None) -> PerfStats:
    """Parse ``perf report --stats``.

    The per-event table ("cpu-clock stats:") counts samples and *lost samples*; the
    aggregated table's "LOST_SAMPLES events" counts lost-sample *records* (often 1 for
    thousands of lost samples), so only the per-event value is a sample count.
    """
    sections: dict[str, dict[str, int]] = {}
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith(" stats:") or line == "Aggregated stats:":
            current = line[: -len(" stats:")] if line != "Aggregated stats:" else ""
            sections.setdefault(current, {})
            continue
        m = re.match(r"^(?P<kind>[A-Z_]+) events:\s+(?P<n>\d+)", line)
        if m is not None and current is not None:
            sections[current][m.group("kind")] = int(m.group("n"))
    aggregated = sections.pop("", {})
    if event is not None and event in sections:
        per_event = sections[event]
    elif len(sections) == 1:
        per_event = next(iter(sections.values()))
    else:
        per_event = {}
    samples = per_event.get("SAMPLE")
    lost = per_event.get("LOST_SAMPLES", 0 if samples is not None else None)
    return PerfStats(
        samples=samples,
        lost_samples=lost,
        lost_chunks=aggregated.get("LOST"),
        total_events=aggregated.get("TOTAL"),
        lost_sample_records=aggregated.get("LOST_SAMPLES"),
    )
