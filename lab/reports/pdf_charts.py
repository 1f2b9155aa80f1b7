"""How a chart of :mod:`lab.reports.charts` is drawn in the PDF: a horizontal grouped bar
chart in ``reportlab.graphics`` (one bar per series and category, a value label at each
bar's end, a linear or logarithmic axis with round ticks, "not observed" in words where
the model holds no value).

    drawing = draw(chart, width=480)         # a reportlab Drawing, a platypus flowable
"""

from __future__ import annotations

import math

# reportlab reads its settings as its graphics modules are imported: these first
import lab.reports.reportlab_settings  # noqa: F401

# isort: split
from reportlab.graphics.shapes import Drawing, Line, Rect, String
from reportlab.lib import colors
from reportlab.pdfbase.pdfmetrics import stringWidth

from lab.reports import fonts
from lab.reports.charts import BarChart, Series, Unit, value_text

FONT = fonts.SANS
BOLD = fonts.BOLD
ITALIC = fonts.ITALIC

LABEL_SIZE = 7.0
TICK_SIZE = 6.5
VALUE_SIZE = 6.0


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
