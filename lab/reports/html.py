"""The HTML report: one self-contained page (no network, no external font, script or style),
the verdict first, the matrix linking to each scenario, each invocation's records and raw
evidence in collapsible sections with relative links to the archived files, and one
swimlane chart per invocation as inline SVG. Readable at phone width.

    from lab.reports.html import render_html
    html = render_html(run, files=files, timeline=rows)   # rows: timeline.jsonl's dicts
    (run_dir / "report.html").write_text(html, encoding="utf-8")

It walks the report's outline (:mod:`lab.reports.outline`) like the Markdown and PDF views
and only draws; every string is escaped (:func:`lab.reports.text.html_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lab.model import CLAUSE_TITLES, CLAUSES, RunResult
from lab.reports import ArchivedFile, charts
from lab.reports.html_svg import swimlane_svg
from lab.reports.outline import run_outline
from lab.reports.outline_scenario import scenario_anchor
from lab.reports.run import run_name, scenario_label
from lab.reports.swimlanes import lanes_of, swimlanes
from lab.reports.table import NOT_OBSERVED, Table
from lab.reports.text import html_text
from lab.reports.view import (
    RECORDS,
    Block,
    Bullets,
    Chart,
    Matrix,
    RawFiles,
    Section,
    Swimlanes,
    TableBlock,
    Text,
    Verbatim,
)

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24}
main{max-width:60rem;margin:0 auto;padding:.75rem}
h1{font-size:1.35rem}h2{font-size:1.15rem;border-bottom:1px solid #ccd;margin-top:2rem}
h3{font-size:1rem}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;margin:.5rem 0}
table{border-collapse:collapse;font-size:.85rem}
th,td{border:1px solid #9aa5b1;padding:.2rem .35rem;text-align:left;vertical-align:top;
overflow-wrap:break-word}
#verdict-matrix td,#verdict-matrix th{white-space:nowrap}
th{background:#e3e8ef}
td.pass{background:#c8e6c9}td.fail{background:#f4b6b6}
td.not-observed{background:#ffe0b2}td.not-exercised{background:#cfd8dc}
td.mismatch{outline:3px solid #b00020;outline-offset:-3px}
.box{border:2px solid #b00020;background:#fff4f4;padding:.5rem;font-weight:600}
.strong{font-weight:600}.note{font-style:italic;font-size:.85rem;color:#333}
details{margin:.4rem 0;border:1px solid #dde;padding:.3rem .5rem}
summary{cursor:pointer;font-weight:600}
pre{white-space:pre-wrap;overflow-wrap:break-word;background:#f2f2f2;padding:.4rem}
code{overflow-wrap:break-word}
p,li,figcaption{overflow-wrap:anywhere}
svg{width:100%;height:auto;display:block}
"""


def render_html(
    run: RunResult,
    *,
    files: list[ArchivedFile] | None,
    timeline: Iterable[Mapping[str, Any]] = (),
    outline: list[Section] | None = None,
) -> str:
    title = f"Execution Evidence Lab report: {run_name(run.run_id)}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # nothing outside this file is ever fetched
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src 'none'\">",
        f"<title>{html_text(title)}</title><style>{_CSS}</style></head>",
        f'<body><main><h1 id="top">{html_text(title)}</h1>',
    ]
    lanes = swimlanes(timeline)
    open_section = False
    for section in run_outline(run, files) if outline is None else outline:
        blocks = [b for b in section.blocks if "html" in b.views]
        if "html" not in section.views or (not blocks and section.level > 0):
            continue
        if section.level == 0:
            out.append("</section>" if open_section else "")
            out.append(f'<section id="{_id(section)}"><h2>{html_text(section.title)}</h2>')
            open_section = True
            out += [_block(b, lanes) for b in blocks]
        else:
            out.append(_subsection(section, blocks, lanes))
    out.append("</section>" if open_section else "")
    out.append("</main></body></html>\n")
    return "\n".join(part for part in out if part)


def _id(section: Section) -> str:
    if section.anchor:
        return section.anchor
    return "".join(ch if ch.isalnum() else "-" for ch in section.title.lower()).strip("-")


def _subsection(section: Section, blocks: list[Block], lanes: Any) -> str:
    body = "\n".join(_block(b, lanes) for b in blocks)
    title = html_text(section.title)
    if section.views == RECORDS or section.title in ("Raw evidence", "Timeline"):
        # each invocation's records and the raw evidence: collapsed until asked for
        return f"<details><summary>{title}</summary>\n{body}\n</details>"
    return f"<h3>{title}</h3>\n{body}"


def _block(block: Block, lanes: Any) -> str:
    if isinstance(block, Text):
        return f'<p class="{block.style}">{html_text(block.text)}</p>'
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{html_text(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, TableBlock):
        caption = f"<p>{html_text(block.caption)}</p>" if block.caption else ""
        return caption + _table(block.table)
    if isinstance(block, Verbatim):
        return f"<p>{html_text(block.caption)}</p><pre>{html_text(block.text, 20_000)}</pre>"
    if isinstance(block, Chart):
        return _chart(block.chart)
    if isinstance(block, Matrix):
        return _matrix(block.run)
    if isinstance(block, RawFiles):
        items = "".join(
            f'<li><a href="{html_text(p)}">{html_text(p)}</a></li>' for p in block.paths
        )
        return f"<ul>{items}</ul>"
    if isinstance(block, Swimlanes):
        charts_here = lanes_of(lanes, block.scenario, block.repetition)
        if not charts_here:
            return (
                "<p>No timeline rows on the run's one clock for this scenario "
                "(timeline.jsonl holds no <code>t_ns</code> rows for it).</p>"
            )
        return "\n".join(swimlane_svg(chart) for chart in charts_here)
    raise TypeError(f"no HTML drawing for {type(block).__name__}")


def _table(table: Table) -> str:
    parts = []
    if table.rows:
        head = "".join(f"<th>{html_text(h)}</th>" for h in table.header)
        rows = "".join("<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in table.rows)
        parts.append(f'<div class="scroll"><table><tr>{head}</tr>{rows}</table></div>')
    parts += [f'<p class="note">{html_text(n)}</p>' for n in table.notes]
    return "\n".join(parts)


def _td(value: str) -> str:
    cls = f' class="{value}"' if value in ("pass", "fail", "not-observed", "not-exercised") else ""
    return f"<td{cls}>{html_text(value).replace(chr(10), '<br>')}</td>"


def _chart(chart: charts.BarChart) -> str:
    header = ["scenario" if chart.categories else "", *(s.name for s in chart.series)]
    rows = [
        [cat, *(NOT_OBSERVED if v is None else charts.value_text(v, chart.unit) for v in vals)]
        for cat, vals in zip(chart.categories, chart.values, strict=True)
    ]
    table = Table(header, rows, [chart.caption, *chart.notes])
    return f"<h3>{html_text(chart.title)}</h3>\n{_table(table)}"


def _matrix(run: RunResult) -> str:
    head = "".join(
        f'<th><abbr title="{html_text(CLAUSE_TITLES[c])}">{c}</abbr></th>' for c in CLAUSES
    )
    rows = []
    for s in run.scenarios:
        cells = []
        for c in CLAUSES:
            verdict = s.verdicts.get(c)
            cls: list[str] = [] if verdict is None else [verdict.observed]
            if verdict is not None and verdict.agrees is False:
                cls.append("mismatch")
            text = "-" if verdict is None else html_text(verdict.observed)
            if verdict is not None and verdict.agrees is False:
                text += f"<br><b>expected {html_text(str(verdict.expected))}</b>"
            cells.append(f'<td class="{" ".join(cls)}">{text}</td>')
        cal = s.calibration
        link = f'<a href="#{scenario_anchor(run, s)}">{html_text(scenario_label(s, run))}</a>'
        rows.append(
            f"<tr><th>{link}</th>{''.join(cells)}"
            f"<td>{cal.met}/{cal.total} met<br>{cal.not_met} not met<br>"
            f"{cal.not_observed} not observed</td></tr>"
        )
    table = (
        f'<div class="scroll"><table id="verdict-matrix"><tr><th>scenario</th>{head}'
        f"<th>calibration</th></tr>{''.join(rows)}</table></div>"
    )
    clauses = "".join(f"<li><b>{c}</b> {html_text(CLAUSE_TITLES[c])}</li>" for c in CLAUSES)
    return (
        "<p>Each cell: the observed outcome, and whether the scenario file expected it; a red "
        "frame marks a disagreement. Not observed means the evidence needed was unavailable, "
        "never a pass, a fail or a zero.</p>" + table + f"<ul>{clauses}</ul>"
    )
