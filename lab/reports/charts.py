"""Charts for the PDF report: what to plot, as pure functions of the model (how to draw
it, a horizontal grouped bar chart in ``reportlab.graphics``, is :mod:`lab.reports.pdf_charts`;
the Markdown and HTML reports read the same charts as tables, without reportlab).

    chart = source_bytes_chart(run)          # BarChart | None (None: nothing observed)
    drawing = pdf_charts.draw(chart, 480)    # a reportlab Drawing, a platypus flowable
    tracing_overhead(scenario)               # [Overhead(collector="strace", wall_ratio=3.4, ...)]

Horizontal bars keep every category label on its own line, so labels never overlap however
many scenarios there are. A value the model does not hold is drawn as the words
"not observed", never as an empty or zero-length bar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lab.model import PROCESS_COLLECTORS, Overhead, RunResult, ScenarioResult
from lab.reports.scenario import overlap_note
from lab.reports.symbols import SymbolBar, symbol_bars

Unit = Literal["bytes", "count", "ratio", "pct"]

#: Colour-blind-safe palette (Okabe & Ito), one colour per series in order.
PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#000000",
)


@dataclass(frozen=True)
class Series:
    name: str
    colour: str


@dataclass
class BarChart:
    """What to draw: ``values[c][s]`` is category ``c`` of series ``s`` (None: not observed)."""

    title: str
    axis_label: str
    categories: list[str]
    series: list[Series]
    values: list[list[float | None]]
    unit: Unit = "count"
    log: bool = False
    #: one or two sentences printed under the chart: where the figures come from
    caption: str = ""
    notes: list[str] = field(default_factory=list)
    #: the first this many categories are drawn in bold (the client's own functions)
    bold_categories: int = 0


# --------------------------------------------------------------------------- what to plot


def tracing_overhead(scenario: ScenarioResult) -> list[Overhead]:
    """The model's own figure (``ScenarioResult.overhead``): drawn here, not computed."""
    return scenario.overhead()


def first_repetitions(run: RunResult) -> list[ScenarioResult]:
    """One result per scenario name (its lowest repetition), in run order."""
    chosen: dict[str, ScenarioResult] = {}
    for s in run.scenarios:
        if s.name not in chosen or s.repetition < chosen[s.name].repetition:
            chosen[s.name] = s
    return list(chosen.values())


def _repetition_note(run: RunResult) -> list[str]:
    if len(first_repetitions(run)) < len(run.scenarios):
        return ["Repeated scenarios are drawn from their first repetition."]
    return []


def _invocation_count(scenarios: list[ScenarioResult]) -> int:
    return max((len(s.invocations()) for s in scenarios), default=0)


def source_bytes_chart(run: RunResult) -> BarChart | None:
    scenarios = first_repetitions(run)
    n = _invocation_count(scenarios)
    values: list[list[float | None]] = []
    for s in scenarios:
        reads: list[float | None] = [
            None
            if inv.observed.strace is None or inv.observed.strace.source_bytes_read is None
            else float(inv.observed.strace.source_bytes_read)
            for inv in s.invocations()
        ]
        # a figure strace did not observe is a gap in the chart, never a zero bar
        values.append([reads[i] if i < len(reads) else None for i in range(n)])
    if not any(v is not None for row in values for v in row):
        return None
    return BarChart(
        title="Logical source bytes read per invocation (strace)",
        axis_label="bytes read from the source file (log scale)",
        categories=[s.name for s in scenarios],
        series=[Series(f"invocation {i + 1}", PALETTE[i % len(PALETTE)]) for i in range(n)],
        values=values,
        unit="bytes",
        log=True,
        caption=(
            "Bytes returned by read calls on the source file: logical reads, not disk "
            "traffic. 'not observed' means strace did not observe that invocation."
        ),
        notes=_repetition_note(run),
    )


def connections_chart(run: RunResult) -> BarChart | None:
    scenarios = first_repetitions(run)
    n = _invocation_count(scenarios)
    if n == 0:
        return None
    series: list[Series] = []
    for i in range(n):
        series.append(Series(f"invocation {i + 1} to receiver", PALETTE[(2 * i) % len(PALETTE)]))
        series.append(Series(f"invocation {i + 1} to decoy", PALETTE[(2 * i + 1) % len(PALETTE)]))
    values: list[list[float | None]] = []
    for s in scenarios:
        invs = s.primary.invocations if s.primary else []
        row: list[float | None] = []
        for i in range(n):
            inv = invs[i] if i < len(invs) else None
            row.append(None if inv is None else float(inv.receiver.connections))
            row.append(None if inv is None else float(inv.decoy.connections))
        values.append(row)
    return BarChart(
        title="Connections per invocation, by destination",
        axis_label="connections accepted (receiver and decoy records)",
        categories=[s.name for s in scenarios],
        series=series,
        values=values,
        unit="count",
        caption=(
            "From the receiver's and the decoy's own records in the untraced pass. Connections "
            "to any other destination appear only in strace, bpftrace and packets."
        ),
        notes=_repetition_note(run),
    )


def payload_chart(run: RunResult) -> BarChart | None:
    scenarios = first_repetitions(run)
    n = _invocation_count(scenarios)
    if n == 0:
        return None
    values: list[list[float | None]] = []
    for s in scenarios:
        invs = s.primary.invocations if s.primary else []
        values.append(
            [
                float(invs[i].receiver.payload_bytes_consumed) if i < len(invs) else None
                for i in range(n)
            ]
        )
    return BarChart(
        title="Upload payload bytes consumed by the receiver per invocation",
        axis_label="payload bytes consumed (receiver records)",
        categories=[s.name for s in scenarios],
        series=[Series(f"invocation {i + 1}", PALETTE[i % len(PALETTE)]) for i in range(n)],
        values=values,
        unit="bytes",
        caption=(
            "Bytes the receiver application consumed, including transfers it later dropped or "
            "rejected; packet payload counts are a different measurement."
        ),
        notes=_repetition_note(run),
    )


def overhead_charts(run: RunResult) -> list[BarChart]:
    scenarios = first_repetitions(run)
    per = {s.name: {o.collector: o for o in tracing_overhead(s)} for s in scenarios}
    collectors = [c for c in PROCESS_COLLECTORS if any(c in v for v in per.values())]
    if not collectors:
        return []
    charts = []
    for attr, what in (("wall_ratio", "wall"), ("cpu_ratio", "CPU")):
        values: list[list[float | None]] = []
        for s in scenarios:
            row: list[float | None] = []
            for c in collectors:
                o = per[s.name].get(c)
                row.append(None if o is None else getattr(o, attr))
            values.append(row)
        present = [v for row in values for v in row if v is not None and v > 0]
        # one slow tracer (perf's DWARF record around a ~10 ms client) would flatten every
        # other bar on a linear axis
        log = bool(present) and max(present) / min(present) > 30
        scale = "log scale, " if log else ""
        charts.append(
            BarChart(
                title=f"Tracing overhead: traced / untraced client {what} time",
                axis_label=f"ratio of client {what} time ({scale}1.00x = no overhead)",
                log=log,
                categories=[s.name for s in scenarios],
                series=[Series(c, PALETTE[i % len(PALETTE)]) for i, c in enumerate(collectors)],
                values=values,
                unit="ratio",
                caption=(
                    f"The traced command's {what} time summed over the invocations of each "
                    "traced pass, divided by the untraced client's. strace and perf wrap each "
                    "invocation, so their start-up and teardown and their own CPU are included; "
                    "bpftrace attaches before the pass (once per pass or once for several, "
                    "see Observers), so its attach and stop are not. Single runs: an "
                    "indication of how much each tracer changes execution, not a benchmark "
                    "(see benchmarks/ for medians)."
                ),
                notes=_repetition_note(run) + overlap_note(scenarios),
            )
        )
    return charts


def perf_symbols_chart(
    scenario: ScenarioResult, label: str, client: str | None = None, limit: int = 8
) -> BarChart | None:
    """CPU samples by symbol (inclusive and self %) for each invocation perf observed: the
    client's own functions first, unresolved addresses folded per DSO (:func:`symbol_bars`),
    at most ``limit`` rows."""
    indices: list[int] = []
    bars: dict[str, SymbolBar] = {}
    weights: dict[tuple[int, str], tuple[float | None, float | None]] = {}
    for inv in scenario.invocations():
        perf = inv.observed.perf
        if perf is None:
            continue
        index = inv.index
        indices.append(index)
        for bar in symbol_bars(perf, client):
            bars.setdefault(bar.label, bar)
            weights[(index, bar.label)] = (bar.inclusive_pct, bar.self_pct)
    if not bars:
        return None

    def rank(bar: SymbolBar) -> tuple[int, float, str]:
        group = 0 if bar.own and not bar.unresolved else (2 if bar.unresolved else 1)
        best = max((weights.get((i, bar.label), (None, None))[0] or 0.0) for i in indices)
        return (group, -best, bar.label)

    ordered = sorted(bars.values(), key=rank)
    # every folded "<dso>, no symbols" row stays (one per object: the point of folding);
    # the client's own functions come first, other symbols fill what is left
    own = [b for b in ordered if rank(b)[0] == 0][:limit]
    folded = [b for b in ordered if b.unresolved]
    room = max(0, limit - len(own) - len(folded))
    shown = own + [b for b in ordered if rank(b)[0] == 1][:room] + folded
    series: list[Series] = []
    for n, i in enumerate(indices):
        series.append(Series(f"invocation {i} inclusive", PALETTE[(2 * n) % len(PALETTE)]))
        series.append(Series(f"invocation {i} self", PALETTE[(2 * n + 1) % len(PALETTE)]))
    values: list[list[float | None]] = []
    for bar in shown:
        row_values: list[float | None] = []
        for i in indices:
            inclusive, self_pct = weights.get((i, bar.label), (None, None))
            row_values += [inclusive, self_pct]
        values.append(row_values)
    notes = []
    if len(ordered) > len(shown):
        notes.append(
            f"{len(ordered) - len(shown)} further row(s) of smaller weight are in report.md "
            "(CPU samples by symbol)."
        )
    return BarChart(
        title=f"CPU samples by symbol: {label}",
        axis_label="share of samples (%)",
        categories=[b.label for b in shown],
        series=series,
        values=values,
        unit="pct",
        bold_categories=sum(1 for b in shown if b.own and not b.unresolved),
        caption=(
            "The client's own functions first (bold), then other symbols with their object, "
            "then 'object, no symbols': the addresses perf could not name in that object, "
            "folded (self: their sum; inclusive: the largest, as their call chains overlap). "
            "Inclusive: samples in the symbol or in what it called; self: in the symbol "
            "itself. 'not observed': not among that invocation's top symbols. One chart per "
            "scenario, its first repetition."
        ),
        notes=notes,
    )


def value_text(value: float, unit: Unit) -> str:
    if unit == "ratio":
        return f"{value:.2f}x"
    if unit == "pct":
        return f"{value:.1f}%"
    return f"{round(value):,}"
