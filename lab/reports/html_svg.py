"""A swimlane chart as inline SVG for the HTML report: one lane per kind of observer, each
event a mark at its ``t_ns`` (with its source, event and time as a tooltip), the axis in
time since the invocation's first event.

    svg = swimlane_svg(chart)    # chart: lab.reports.swimlanes.Swimlane

The SVG scales to the page's width (``viewBox``), so it reads on a phone as on a desk.
"""

from __future__ import annotations

from lab.reports.swimlanes import Swimlane, fmt_offset
from lab.reports.text import html_text

_WIDTH = 720
_LABEL = 78
_LANE = 22
_TOP = 26
#: one colour per timeline source (the PDF's drawing uses the same)
COLOURS = {
    "runner": "#555555",
    "client": "#1f6feb",
    "strace": "#8250df",
    "bpftrace": "#bf3989",
    "perf": "#9a6700",
    "packets": "#0a7d5b",
    "receiver": "#0969da",
    "decoy": "#cf222e",
    "verifier": "#1a7f37",
}


def swimlane_svg(chart: Swimlane) -> str:
    plot = _WIDTH - _LABEL - 12
    height = _TOP + _LANE * len(chart.lanes) + 22

    def x(t_ns: int) -> float:
        return _LABEL + plot * (t_ns - chart.start_ns) / chart.span_ns

    title = html_text(chart.title)
    parts = [
        f"<figure><figcaption>{title} ({fmt_offset(chart.span_ns)} from its first event to "
        "its last)</figcaption>",
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {height}" '
        f'role="img" aria-label="{title}" font-family="sans-serif" font-size="11">',
    ]
    for i, (lane, marks, omitted) in enumerate(chart.lanes):
        y = _TOP + _LANE * i
        parts.append(
            f'<rect x="{_LABEL}" y="{y}" width="{plot}" height="{_LANE - 4}" '
            f'fill="{"#f6f8fa" if i % 2 else "#eef1f4"}"/>'
            f'<text x="4" y="{y + 13}">{html_text(lane)}</text>'
        )
        for mark in marks:
            tip = f"{mark.source} {mark.event} at +{fmt_offset(mark.t_ns - chart.start_ns)}"
            parts.append(
                f'<rect x="{x(mark.t_ns) - 1.5:.1f}" y="{y + 2}" width="3" height="{_LANE - 8}" '
                f'fill="{COLOURS.get(mark.source, "#333")}"><title>{html_text(tip, 300)}'
                "</title></rect>"
            )
        if omitted:
            parts.append(
                f'<text x="{_WIDTH - 8}" y="{y + 13}" text-anchor="end">'
                f"+{omitted} more (timeline.jsonl)</text>"
            )
    axis = _TOP + _LANE * len(chart.lanes) + 12
    for k in range(5):
        t = chart.span_ns * k // 4
        anchor = "start" if k == 0 else ("end" if k == 4 else "middle")
        parts.append(
            f'<text x="{_LABEL + plot * k / 4:.1f}" y="{axis}" text-anchor="{anchor}">'
            f"+{fmt_offset(t)}</text>"
        )
    parts.append("</svg>")
    events = sum(len(marks) for _lane, marks, _o in chart.lanes)
    parts.append(f'<p class="note">{events} events drawn, in time order.</p></figure>')
    return "".join(parts)
