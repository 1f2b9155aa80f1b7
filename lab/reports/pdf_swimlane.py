"""A swimlane chart as a reportlab drawing for the PDF: the same lanes and marks as the HTML
report's SVG (:mod:`lab.reports.html_svg`), on the run's one clock.

    flow += swimlane_flow(lanes_of(charts, "baseline", 1))

The PDF's page budget holds one chart per scenario repetition: its most telling invocation
(the one with the most lanes holding events, then the most events); the note under it says
how many others report.html draws.
"""

from __future__ import annotations

# reportlab reads its settings as its graphics modules are imported: these first
import lab.reports.reportlab_settings  # noqa: F401

# isort: split
from reportlab.graphics.shapes import Drawing, Rect, String
from reportlab.lib import colors
from reportlab.platypus import Flowable, Spacer

from lab.reports.fonts import SANS
from lab.reports.html_svg import COLOURS
from lab.reports.pdf_blocks import WIDTH, para
from lab.reports.swimlanes import Swimlane, fmt_offset

_LABEL = 52.0
_LANE = 11.0


def most_telling(charts: list[Swimlane]) -> Swimlane:
    def weight(chart: Swimlane) -> tuple[int, int]:
        filled = sum(1 for _lane, marks, _o in chart.lanes if marks)
        return filled, sum(len(marks) for _lane, marks, _o in chart.lanes)

    return max(charts, key=weight)


def swimlane_flow(charts: list[Swimlane]) -> list[Flowable]:
    if not charts:
        return [para("No timeline rows on the run's one clock for this scenario.", "note")]
    chart = most_telling(charts)
    caption = (
        f"Timeline of {chart.title}: {fmt_offset(chart.span_ns)} from its first event to "
        f"its last, every observer on one clock."
    )
    if len(charts) > 1:
        caption += f" The other {len(charts) - 1} invocations are drawn in report.html."
    return [draw(chart), para(caption, "note"), Spacer(1, 4)]


def draw(chart: Swimlane) -> Drawing:
    plot = WIDTH - _LABEL - 4
    height = _LANE * len(chart.lanes) + 12
    drawing = Drawing(WIDTH, height)
    for i, (lane, marks, omitted) in enumerate(chart.lanes):
        y = height - _LANE * (i + 1)
        fill = colors.HexColor("#EEF1F4" if i % 2 == 0 else "#F6F8FA")
        drawing.add(Rect(_LABEL, y, plot, _LANE - 2, fillColor=fill, strokeColor=None))
        drawing.add(String(0, y + 2.5, lane, fontName=SANS, fontSize=6.5))
        for mark in marks:
            x = _LABEL + plot * (mark.t_ns - chart.start_ns) / chart.span_ns
            colour = colors.HexColor(COLOURS.get(mark.source, "#333333"))
            drawing.add(Rect(x - 0.6, y + 1, 1.2, _LANE - 4, fillColor=colour, strokeColor=None))
        if omitted:
            text = f"+{omitted} more (timeline.jsonl)"
            drawing.add(String(WIDTH, y + 2.5, text, fontName=SANS, fontSize=6, textAnchor="end"))
    for k in range(5):
        anchor = "start" if k == 0 else ("end" if k == 4 else "middle")
        drawing.add(
            String(
                _LABEL + plot * k / 4,
                1,
                f"+{fmt_offset(chart.span_ns * k // 4)}",
                fontName=SANS,
                fontSize=6,
                textAnchor=anchor,
            )
        )
    return drawing
