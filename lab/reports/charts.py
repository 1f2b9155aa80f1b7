"""Charts for the PDF report: what to plot (pure functions of the model) and how to draw it
(a horizontal grouped bar chart in ``reportlab.graphics``).

    chart = source_bytes_chart(run)          # BarChart | None (None: nothing observed)
    drawing = draw(chart, width=480)         # a reportlab Drawing, a platypus flowable
    tracing_overhead(scenario)               # [Overhead(collector="strace", wall_ratio=3.4, ...)]

Horizontal bars keep every category label on its own line, so labels never overlap however
many scenarios there are. A value the model does not hold is drawn as the words
"not observed", never as an empty or zero-length bar.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from reportlab.graphics.shapes import Drawing, Line, Rect, String
from reportlab.lib import colors
from reportlab.pdfbase.pdfmetrics import stringWidth

from lab.model import PROCESS_COLLECTORS, Overhead, RunResult, ScenarioResult
from lab.reports import fonts
from lab.reports.scenario import overlap_note
from lab.reports.symbols import SymbolBar, symbol_bars

Unit = Literal["bytes", "count", "ratio", "pct"]

FONT = fonts.SANS
BOLD = fonts.BOLD
ITALIC = fonts.ITALIC

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


# --------------------------------------------------------------------------- how to draw

LABEL_SIZE = 7.0
TICK_SIZE = 6.5
VALUE_SIZE = 6.0


def value_text(value: float, unit: Unit) -> str:
    if unit == "ratio":
        return f"{value:.2f}x"
    if unit == "pct":
        return f"{value:.1f}%"
    return f"{round(value):,}"


def tick_text(value: float, unit: Unit) -> str:
    if unit == "ratio":
        return f"{value:g}x"
    if unit == "pct":
        return f"{value:g}%"
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:g}{suffix}"
    return f"{value:g}"


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / target
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _fit(text: str, font: str, size: float, width: float) -> str:
    if stringWidth(text, font, size) <= width:
        return text
    while text and stringWidth(text + "...", font, size) > width:
        text = text[:-1]
    return text + "..."


class _Scale:
    def __init__(self, chart: BarChart, x0: float, x1: float) -> None:
        present = [v for row in chart.values for v in row if v is not None]
        self.log = chart.log
        self.x0, self.x1 = x0, x1
        if self.log:
            positive = [v for v in present if v > 0] or [1.0]
            self.lo = 10 ** math.floor(math.log10(min(positive)))
            self.hi = 10 ** math.ceil(math.log10(max(positive)))
            if self.hi <= self.lo:
                self.hi = self.lo * 10
            decades = round(math.log10(self.hi / self.lo))
            every = max(1, math.ceil(decades / 8))
            self.ticks = [self.lo * 10**d for d in range(0, decades + 1, every)]
        else:
            top = max(present, default=0.0)
            if chart.unit == "ratio":
                top = max(top, 1.0)
            top = top if top > 0 else 1.0
            step = _nice_step(top)
            self.lo, self.hi = 0.0, math.ceil(top / step - 1e-9) * step
            count = round(self.hi / step)
            self.ticks = [step * k for k in range(count + 1)]

    def x(self, value: float) -> float:
        if self.log:
            if value <= self.lo:
                return self.x0
            frac = math.log10(value / self.lo) / math.log10(self.hi / self.lo)
        else:
            frac = (value - self.lo) / (self.hi - self.lo)
        return self.x0 + frac * (self.x1 - self.x0)


def draw(chart: BarChart, width: float) -> Drawing:
    """Lay out and draw ``chart`` ``width`` points wide; the height follows the content."""
    fonts.register()
    n_series = max(1, len(chart.series))
    bar_h = 8.0 if n_series <= 2 else 6.0
    group_gap = 7.0
    group_h = n_series * bar_h + group_gap

    label_w = min(
        width * 0.4,
        max((stringWidth(c, BOLD, LABEL_SIZE) for c in chart.categories), default=20) + 12,
    )
    value_labels = [
        value_text(v, chart.unit) for row in chart.values for v in row if v is not None
    ] + ["not observed"]
    value_w = max(stringWidth(t, FONT, VALUE_SIZE) for t in value_labels) + 6

    # legend: items flow left to right and wrap, so long series names never collide
    legend_rows: list[list[tuple[Series, float]]] = [[]]
    cursor = 0.0
    for s in chart.series:
        item_w = 10 + stringWidth(s.name, FONT, LABEL_SIZE) + 14
        if cursor + item_w > width and legend_rows[-1]:
            legend_rows.append([])
            cursor = 0.0
        legend_rows[-1].append((s, cursor))
        cursor += item_w

    title_h = 16.0
    legend_h = 11.0 * len(legend_rows) + 4
    plot_h = len(chart.categories) * group_h
    axis_h = 26.0
    height = title_h + legend_h + plot_h + axis_h
    d = Drawing(width, height, initialFontName=FONT)

    y = height - 11
    d.add(String(0, y, chart.title, fontName=BOLD, fontSize=9))
    y = height - title_h
    for row in legend_rows:
        y -= 11
        for s, x in row:
            d.add(Rect(x, y, 8, 7, fillColor=colors.HexColor(s.colour), strokeColor=None))
            d.add(String(x + 11, y + 0.5, s.name, fontName=FONT, fontSize=LABEL_SIZE))

    plot_top = height - title_h - legend_h
    plot_bottom = plot_top - plot_h
    x0, x1 = label_w, width - value_w
    scale = _Scale(chart, x0, x1)

    for tick in scale.ticks:
        tx = scale.x(tick)
        d.add(
            Line(
                tx,
                plot_bottom,
                tx,
                plot_top,
                strokeColor=colors.HexColor("#DDDDDD"),
                strokeWidth=0.5,
            )
        )
        d.add(Line(tx, plot_bottom, tx, plot_bottom - 3, strokeColor=colors.black, strokeWidth=0.5))
        d.add(
            String(
                tx,
                plot_bottom - 10,
                tick_text(tick, chart.unit),
                fontName=FONT,
                fontSize=TICK_SIZE,
                textAnchor="middle",
            )
        )
    if chart.unit == "ratio" and scale.lo <= 1.0 <= scale.hi:
        one = scale.x(1.0)
        d.add(
            Line(
                one,
                plot_bottom,
                one,
                plot_top,
                strokeColor=colors.HexColor("#888888"),
                strokeWidth=0.8,
                strokeDashArray=[2, 2],
            )
        )
    d.add(Line(x0, plot_bottom, x1, plot_bottom, strokeColor=colors.black, strokeWidth=0.7))
    d.add(Line(x0, plot_bottom, x0, plot_top, strokeColor=colors.black, strokeWidth=0.7))
    d.add(
        String(
            (x0 + x1) / 2,
            plot_bottom - 21,
            chart.axis_label,
            fontName=FONT,
            fontSize=LABEL_SIZE,
            textAnchor="middle",
        )
    )

    for c, category in enumerate(chart.categories):
        top = plot_top - c * group_h - group_gap / 2
        mid = top - n_series * bar_h / 2
        font = BOLD if c < chart.bold_categories else FONT
        d.add(
            String(
                x0 - 5,
                mid - 2.5,
                _fit(category, font, LABEL_SIZE, label_w - 8),
                fontName=font,
                fontSize=LABEL_SIZE,
                textAnchor="end",
            )
        )
        for s_index, s in enumerate(chart.series):
            value = chart.values[c][s_index] if s_index < len(chart.values[c]) else None
            by = top - (s_index + 1) * bar_h
            if value is None:
                d.add(
                    String(
                        x0 + 3,
                        by + 1.5,
                        "not observed",
                        fontName=ITALIC,
                        fontSize=VALUE_SIZE,
                        fillColor=colors.HexColor("#777777"),
                    )
                )
                continue
            end = scale.x(value)
            if end > x0:
                d.add(
                    Rect(
                        x0,
                        by + 0.5,
                        end - x0,
                        bar_h - 1,
                        fillColor=colors.HexColor(s.colour),
                        strokeColor=None,
                    )
                )
            d.add(
                String(
                    end + 3,
                    by + 1.5,
                    value_text(value, chart.unit),
                    fontName=FONT,
                    fontSize=VALUE_SIZE,
                )
            )
    return d
