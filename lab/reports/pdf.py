"""The PDF report: the same content as ``report.md``, with a colour-coded verdict matrix and
charts drawn from the data. Byte-for-byte reproducible for the same input: reportlab runs in
invariant mode and the document date (and the /ID it seeds) is the run's ``finished_at``.

    from lab.reports.pdf import render_pdf
    render_pdf(run, run_dir / "report.pdf", files=files)

Only the 14 standard PDF fonts are used (nothing embedded, nothing read from the host), and
every table cell is a wrapped paragraph so that no text runs off the page.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.enums import TA_LEFT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    KeepTogether,
    PageBreak,
    Paragraph,
    Preformatted,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from lab.model import CLAUSE_TITLES, CLAUSES, RunResult, ScenarioResult, Verdict
from lab.reports import ArchivedFile, charts, text

PAGE = A4
MARGIN = 16 * mm
WIDTH = PAGE[0] - 2 * MARGIN

#: Verdict colours: pass green, fail red, not-observed amber, not-exercised grey-blue (never
#: mistaken for a pass or a fail).
OUTCOME_FILL = {
    "pass": colors.HexColor("#C8E6C9"),
    "fail": colors.HexColor("#F4B6B6"),
    "not-observed": colors.HexColor("#FFE0B2"),
    "not-exercised": colors.HexColor("#CFD8DC"),
}
MISMATCH_EDGE = colors.HexColor("#B00020")
HEADER_FILL = colors.HexColor("#E3E8EF")
GRID = colors.HexColor("#9AA5B1")

STYLES: dict[str, ParagraphStyle] = {
    "title": ParagraphStyle(
        "title", fontName="Helvetica-Bold", fontSize=16, leading=20, spaceAfter=6
    ),
    "h1": ParagraphStyle(
        "h1", fontName="Helvetica-Bold", fontSize=13, leading=16, spaceBefore=8, spaceAfter=5
    ),
    "h2": ParagraphStyle(
        "h2", fontName="Helvetica-Bold", fontSize=10, leading=13, spaceBefore=7, spaceAfter=3
    ),
    "body": ParagraphStyle(
        "body", fontName="Helvetica", fontSize=8.5, leading=11, spaceAfter=4, alignment=TA_LEFT
    ),
    "strong": ParagraphStyle(
        "strong", fontName="Helvetica-Bold", fontSize=9, leading=12, spaceAfter=4
    ),
    "note": ParagraphStyle(
        "note",
        fontName="Helvetica-Oblique",
        fontSize=7.5,
        leading=9.5,
        spaceAfter=4,
        textColor=colors.HexColor("#333333"),
    ),
    "cell": ParagraphStyle("cell", fontName="Helvetica", fontSize=7, leading=8.6),
    "cellhead": ParagraphStyle("cellhead", fontName="Helvetica-Bold", fontSize=7, leading=8.6),
    "mono": ParagraphStyle("mono", fontName="Courier", fontSize=6.4, leading=8.2),
    "pre": ParagraphStyle("pre", fontName="Courier", fontSize=8, leading=10),
    "box": ParagraphStyle(
        "box",
        fontName="Helvetica-Bold",
        fontSize=9,
        leading=12,
        borderColor=colors.HexColor("#B00020"),
        borderWidth=1,
        borderPadding=6,
        backColor=colors.HexColor("#FFF4F4"),
        spaceBefore=6,
        spaceAfter=10,
    ),
}


def render_pdf(run: RunResult, out: Path, *, files: list[ArchivedFile] | None) -> None:
    """Write the PDF report of ``run`` to ``out`` (the same bytes for the same input)."""
    buffer = io.BytesIO()
    doc = _Document(
        buffer,
        pagesize=PAGE,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN + 4,
        bottomMargin=MARGIN + 4,
        title=f"Execution Evidence Lab report: run {run.run_id}",
        author="Execution Evidence Lab",
        subject="Independent evidence for a backup client's claims",
        creator="lab.reports.pdf",
        invariant=1,
    )
    story = _story(run, files)
    footer = _footer(run.run_id)
    with _document_date(_epoch(run.finished_at)):
        doc.build(story, onFirstPage=footer, onLaterPages=footer)
    out.write_bytes(buffer.getvalue())


# --------------------------------------------------------------------------- document


class _Document(SimpleDocTemplate):  # type: ignore[misc]
    """Adds a PDF outline entry for every section heading (deterministic keys)."""

    def afterFlowable(self, flowable: Flowable) -> None:
        level = getattr(flowable, "_outline_level", None)
        if level is None:
            return
        key = f"section-{self.seq.nextf('outline')}"
        self.canv.bookmarkPage(key)
        self.canv.addOutlineEntry(flowable.getPlainText(), key, level=level, closed=level > 0)


def _epoch(stamp: str) -> int | None:
    """RFC 3339 ``finished_at`` as seconds since the epoch, or None if it does not parse."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp())


@contextmanager
def _document_date(epoch: int | None) -> Iterator[None]:
    """Pin reportlab's clock to the run's finish for the duration of one build.

    reportlab seeds both the document date and the /ID digest from ``SOURCE_DATE_EPOCH``
    when it is set (and from 2000-01-01 in invariant mode when it is not), so setting it to
    the run's own finish time makes the PDF depend on the run alone, whatever the caller's
    environment holds. The previous value is restored afterwards.
    """
    saved = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        os.environ.pop("SOURCE_DATE_EPOCH", None)
    else:
        os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = saved


def _footer(run_id: str) -> Callable[[Canvas, Any], None]:
    def draw(canvas: Canvas, doc: Any) -> None:
        canvas.saveState()
        canvas.setFont("Helvetica", 7)
        canvas.setFillColor(colors.HexColor("#555555"))
        canvas.drawString(MARGIN, MARGIN - 2, f"Execution Evidence Lab - run {run_id}")
        canvas.drawRightString(PAGE[0] - MARGIN, MARGIN - 2, f"page {doc.page}")
        canvas.restoreState()

    return draw


# --------------------------------------------------------------------------- building blocks


def _p(value: str, style: str = "cell") -> Paragraph:
    return Paragraph(escape(value).replace("\n", "<br/>"), STYLES[style])


def _heading(value: str, level: int) -> Paragraph:
    para = Paragraph(escape(value), STYLES["h1" if level == 0 else "h2"])
    para._outline_level = level
    return para


def _is_digest(value: str) -> bool:
    return len(value) >= 40 and all(c in "0123456789abcdef:sha" for c in value)


def _grid(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    widths: Sequence[float],
    extra: Sequence[tuple[Any, ...]] = (),
    first_column_bold: bool = False,
    colour_outcomes: bool = False,
) -> Table:
    """A table of wrapped paragraphs whose header repeats on every page it spans; a cell
    holding exactly an outcome word gets that outcome's colour."""
    data: list[list[Flowable]] = [[_p(h, "cellhead") for h in header]]
    fills: list[tuple[Any, ...]] = []
    for r, row in enumerate(rows, start=1):
        cells: list[Flowable] = []
        for i, value in enumerate(row):
            if colour_outcomes and i > 0 and value in OUTCOME_FILL:
                fills.append(("BACKGROUND", (i, r), (i, r), OUTCOME_FILL[value]))
            style = (
                "mono"
                if _is_digest(value)
                else ("cellhead" if i == 0 and first_column_bold else "cell")
            )
            cells.append(_p(value, style))
        data.append(cells)
    table = Table(data, colWidths=list(widths), repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("BACKGROUND", (0, 0), (-1, 0), HEADER_FILL),
                ("GRID", (0, 0), (-1, -1), 0.4, GRID),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 3),
                ("RIGHTPADDING", (0, 0), (-1, -1), 3),
                ("TOPPADDING", (0, 0), (-1, -1), 2),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
                *fills,
                *extra,
            ]
        )
    )
    return table


def _table(
    table: text.Table, widths: Sequence[float] | None = None, *, colour_outcomes: bool = False
) -> list[Flowable]:
    flow: list[Flowable] = []
    if table.rows:
        flow.append(
            _grid(
                table.header,
                table.rows,
                widths or _even(table.header),
                first_column_bold=True,
                colour_outcomes=colour_outcomes,
            )
        )
        flow.append(Spacer(1, 8))
    flow += [_p(note, "note") for note in table.notes]
    return flow


def _verbatim(block: str) -> Table:
    """Raw probe output, verbatim, in a shaded box (Preformatted alone draws no background)."""
    box = Table([[Preformatted(block, STYLES["pre"])]], colWidths=[WIDTH * 0.6])
    box.setStyle(
        TableStyle(
            [
                ("BACKGROUND", (0, 0), (-1, -1), colors.HexColor("#F2F2F2")),
                ("BOX", (0, 0), (-1, -1), 0.4, GRID),
                ("LEFTPADDING", (0, 0), (-1, -1), 6),
            ]
        )
    )
    box.hAlign = "LEFT"
    return box


def _even(header: Sequence[str], first: float = 120.0) -> list[float]:
    """A wide first (label) column, the rest shared equally."""
    if len(header) == 1:
        return [WIDTH]
    first = min(first, WIDTH / len(header) * 1.6)
    rest = (WIDTH - first) / (len(header) - 1)
    return [first] + [rest] * (len(header) - 1)


def _pairs(rows: Sequence[tuple[str, str]], label: float = 130.0) -> list[Flowable]:
    return [
        _grid(
            ["item", "value"],
            [list(r) for r in rows],
            [label, WIDTH - label],
            first_column_bold=True,
        ),
        Spacer(1, 6),
    ]


# --------------------------------------------------------------------------- story


def _story(run: RunResult, files: list[ArchivedFile] | None) -> list[Flowable]:
    story: list[Flowable] = [
        Paragraph("Execution Evidence Lab report", STYLES["title"]),
        _p(f"Run {run.run_id}, {run.started_at} to {run.finished_at}", "body"),
    ]
    headline = text.evaluation_headline(run.evaluation)
    if headline is not None:
        story += [_p(headline, "strong"), _p(text.EVALUATION_EXIT_STATEMENT, "box")]
    story += [
        _p(f"Calibration: {text.calibration_statement(run.calibration)}.", "strong"),
        _p(text.run_status_statement(run), "body"),
        _p(text.EXIT_STATUS_STATEMENT, "box"),
    ]
    story.append(_heading("Identity of the run", 0))
    story += _pairs(text.identity_rows(run))
    statement = text.signing_statement(run.signing)
    if statement:
        story.append(_p(statement, "box"))
    story.append(PageBreak())
    story += _matrix(run)
    story += _observers(run)
    story.append(PageBreak())
    story += _figures(run)
    story += _repetitions(run)
    if run.evaluation is not None:
        story += _evaluation(run.evaluation)
    for scenario in run.scenarios:
        story.append(PageBreak())
        story += _scenario(run, scenario)
    story.append(PageBreak())
    story += _limits()
    story.append(_heading("Archived files", 0))
    story += _table(text.files_table(files), [WIDTH * 0.38, WIDTH * 0.09, WIDTH * 0.53])
    return story


def _matrix_cell(verdict: Verdict | None) -> Paragraph:
    if verdict is None:
        return _p(text.NOT_RECORDED)
    if verdict.expected is None:
        second = "no expectation"
    elif verdict.agrees is False:
        second = f"MISMATCH: expected {verdict.expected}"
    else:
        second = f"expected {verdict.expected}"
    return Paragraph(
        f"<b>{escape(verdict.observed)}</b><br/><font size=6>{escape(second)}</font>",
        STYLES["cell"],
    )


def _matrix(run: RunResult) -> list[Flowable]:
    flow: list[Flowable] = [
        _heading("Verdict matrix", 0),
        _p(
            "Rows are scenarios, columns the contract clauses. Each cell shows the observed "
            "outcome and the scenario file's expectation. Green: pass; red: fail; amber: "
            "not observed (the evidence needed was unavailable; never counted as a pass, a "
            "fail or a zero). A thick red frame marks an observation that disagrees with its "
            "expectation.",
            "body",
        ),
    ]
    header = ["scenario", *CLAUSES, "calibration"]
    label_w, cal_w = 92.0, 72.0
    clause_w = (WIDTH - label_w - cal_w) / len(CLAUSES)
    data: list[list[Flowable]] = [[_p(h, "cellhead") for h in header]]
    extra: list[tuple[Any, ...]] = []
    for r, s in enumerate(run.scenarios, start=1):
        cal = s.calibration
        row: list[Flowable] = [_p(text.scenario_label(s, run), "cellhead")]
        for c_index, clause in enumerate(CLAUSES, start=1):
            verdict = s.verdicts.get(clause)
            row.append(_matrix_cell(verdict))
            if verdict is not None:
                extra.append(
                    (
                        "BACKGROUND",
                        (c_index, r),
                        (c_index, r),
                        OUTCOME_FILL.get(verdict.observed, colors.white),
                    )
                )
                if verdict.agrees is False:
                    extra.append(("BOX", (c_index, r), (c_index, r), 2.0, MISMATCH_EDGE))
        row.append(
            _p(f"{cal.met}/{cal.total} met, {cal.not_met} not met, {cal.not_observed} not observed")
        )
        if cal.not_met:
            extra.append(("TEXTCOLOR", (-1, r), (-1, r), MISMATCH_EDGE))
        data.append(row)
    table = Table(data, colWidths=[label_w] + [clause_w] * len(CLAUSES) + [cal_w], repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("BACKGROUND", (0, 0), (-1, 0), HEADER_FILL),
                ("GRID", (0, 0), (-1, -1), 0.4, GRID),
                ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
                ("LEFTPADDING", (0, 0), (-1, -1), 3),
                ("RIGHTPADDING", (0, 0), (-1, -1), 3),
                ("TOPPADDING", (0, 0), (-1, -1), 3),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 3),
                *extra,
            ]
        )
    )
    flow += [table, Spacer(1, 5), _legend(), Spacer(1, 5)]
    flow.append(_p(f"Calibration score: {text.calibration_statement(run.calibration)}.", "strong"))
    flow += (
        _grid(
            ["clause", "requirement"],
            [[c, CLAUSE_TITLES[c]] for c in CLAUSES],
            [40, WIDTH - 40],
            first_column_bold=True,
        ),
        Spacer(1, 6),
    )
    return flow


def _legend() -> Table:
    cells = [
        _p("pass", "cellhead"),
        _p("fail", "cellhead"),
        _p("not observed", "cellhead"),
        _p("not exercised", "cellhead"),
        _p("observation disagrees with expectation", "cellhead"),
    ]
    table = Table([cells], colWidths=[60, 60, 80, 80, 170])
    table.setStyle(
        TableStyle(
            [
                ("BACKGROUND", (0, 0), (0, 0), OUTCOME_FILL["pass"]),
                ("BACKGROUND", (1, 0), (1, 0), OUTCOME_FILL["fail"]),
                ("BACKGROUND", (2, 0), (2, 0), OUTCOME_FILL["not-observed"]),
                ("BACKGROUND", (3, 0), (3, 0), OUTCOME_FILL["not-exercised"]),
                ("BOX", (4, 0), (4, 0), 2.0, MISMATCH_EDGE),
                ("BOX", (0, 0), (3, 0), 0.4, GRID),
                ("INNERGRID", (0, 0), (3, 0), 0.4, GRID),
                ("ALIGN", (0, 0), (-1, -1), "CENTER"),
            ]
        )
    )
    table.hAlign = "LEFT"
    return table


def _observers(run: RunResult) -> list[Flowable]:
    flow: list[Flowable] = [
        _heading("Observers", 0),
        _p(f"Collectors used: {text.collectors_used(run)}.", "body"),
        _p(f"Unavailable: {text.collectors_unavailable(run)}.", "body"),
    ]
    flow += _table(text.observer_table(run), [55, 65, 150, WIDTH - 270])
    return flow


def _chart(chart: charts.BarChart) -> Flowable:
    parts: list[Flowable] = [charts.draw(chart, WIDTH), Spacer(1, 3), _p(chart.caption, "note")]
    parts += [_p(note, "note") for note in chart.notes]
    parts.append(Spacer(1, 8))
    return KeepTogether(parts)


def _figures(run: RunResult) -> list[Flowable]:
    flow: list[Flowable] = [_heading("Figures", 0)]
    source = charts.source_bytes_chart(run)
    flow.append(
        _chart(source)
        if source
        else _p("Logical source bytes read: not observed (strace observed no invocation).", "body")
    )
    for chart in (charts.connections_chart(run), charts.payload_chart(run)):
        if chart is not None:
            flow.append(_chart(chart))
    overhead = charts.overhead_charts(run)
    if not overhead:
        flow.append(
            _p(
                "Tracing overhead: not observed (no scenario has both an untraced and "
                "a traced pass).",
                "body",
            )
        )
    flow += [_chart(c) for c in overhead]
    any_perf = False
    for s in charts.first_repetitions(run):
        chart = charts.perf_symbols_chart(s, s.name)
        if chart is not None:
            flow.append(_chart(chart))
            any_perf = True
    if not any_perf:
        flow.append(
            _p("CPU samples by symbol: not observed (perf observed no invocation).", "body")
        )
    return flow


def _repetitions(run: RunResult) -> list[Flowable]:
    flow: list[Flowable] = [CondPageBreak(120), _heading("Repetitions", 0)]
    if not text.has_repetitions(run):
        return [*flow, _p(text.SINGLE_RUN_STATEMENT, "body")]
    if run.aggregate:
        rest = WIDTH - 70 - 18 - 80 - 58 - 58
        flow += _table(
            text.aggregate_table(run), [70, 18, *([rest / len(CLAUSES)] * len(CLAUSES)), 80, 58, 58]
        )
    for name in text.repeated_names(run):
        flow.append(_heading(f"Per repetition: {name}", 1))
        rest = WIDTH - 50 - 100 - 60 - 90
        flow += _table(
            text.repetition_table(run, name),
            [50, *([rest / len(CLAUSES)] * len(CLAUSES)), 100, 60, 90],
            colour_outcomes=True,
        )
    return flow


def _evaluation(evaluation: dict[str, Any]) -> list[Flowable]:
    flow: list[Flowable] = [CondPageBreak(200), _heading("Candidate evaluation", 0)]
    refusal = text.evaluation_refusal(evaluation)
    if refusal:
        flow.append(_p(refusal, "box"))
    flow += _pairs(text.evaluation_identity(evaluation))
    clauses = text.evaluation_clause_table(evaluation)
    if clauses is not None:
        flow.append(_heading("Clauses over the evaluation's repetitions", 1))
        flow += _table(clauses, [35, 200, 120, WIDTH - 355])
    timing = text.evaluation_timing_table(evaluation)
    if timing is not None:
        flow.append(_heading("Timing (untraced)", 1))
        flow += _table(timing, [120, 150, 150, WIDTH - 420])
    diagnostics = text.evaluation_diagnostics_table(evaluation)
    if diagnostics is not None:
        flow.append(_heading("Diagnostics (traced, no threshold)", 1))
        flow += _table(diagnostics, [70, 35, 30, 75, 60, 60, 60, WIDTH - 390])
    frozen = text.evaluation_frozen_files(evaluation)
    if frozen is not None:
        flow.append(_heading("What was frozen before the candidate ran", 1))
        flow += _table(frozen, [WIDTH - 270, 270])
    other = text.evaluation_other_rows(evaluation)
    if other:
        flow.append(_heading("Other recorded fields", 1))
        flow += _pairs(other)
    return flow


def _scenario(run: RunResult, s: ScenarioResult) -> list[Flowable]:
    label = text.scenario_label(s, run)
    flow: list[Flowable] = [
        _heading(f"Scenario {label}", 0),
        _p(s.description, "body"),
        _p(
            f"Scenario file {s.scenario_file}, repetition {s.repetition}, lab wall time "
            f"{text.fmt_seconds(s.wall_s)}. Calibration: "
            f"{text.calibration_statement(s.calibration)}.",
            "body",
        ),
    ]
    if s.error:
        flow.append(_p(f"The scenario did not complete: {s.error}", "box"))
    flow.append(_heading("Verdicts", 1))
    verdicts = text.verdict_table(s)
    fills: list[tuple[Any, ...]] = []
    for r, clause in enumerate(CLAUSES, start=1):
        v = s.verdicts.get(clause)
        if v is not None:
            fills.append(("BACKGROUND", (3, r), (3, r), OUTCOME_FILL.get(v.observed, colors.white)))
            if v.agrees is False:
                fills.append(("BOX", (3, r), (4, r), 2.0, MISMATCH_EDGE))
    flow.append(
        _grid(
            verdicts.header,
            verdicts.rows,
            [30, 100, 40, 56, 50, 66, WIDTH - 342],
            fills,
            first_column_bold=True,
        )
    )
    flow.append(_heading("What the client claimed", 1))
    flow.append(_p(text.records_note(s), "note"))
    flow += _table(text.client_table(s))
    flow.append(_heading("What the observers saw", 1))
    flow += _table(text.receiver_table(s))
    flow += _table(text.decoy_table(s))
    flow += _table(text.verifier_table(s), _even(text.verifier_table(s).header, 90))
    for name in text.observer_names(s):
        if name == "verifier" or not text.observed_any(s, name):
            continue
        flow += _table(text.observer_summary_table(s, name))
        if name == "bpftrace":
            for index, block in text.probe_maps(s):
                flow.append(
                    KeepTogether(
                        [
                            _p(
                                f"bpftrace final map values, invocation {index} (verbatim):", "body"
                            ),
                            _verbatim(block),
                        ]
                    )
                )
        if name == "perf":
            symbols = text.top_symbols_table(s)
            if symbols is not None:
                flow.append(_p("CPU samples by symbol (charted in the Figures section):", "body"))
                flow += _table(symbols, [50, 170, 120, 75, WIDTH - 415])
        if name == "packets":
            flows = text.flows_table(s)
            if flows is not None:
                flow += _table(flows, _even(flows.header, 60))
    unobserved = text.unobserved_table(s)
    if unobserved is not None:
        flow.append(_p("Observers that did not observe this scenario:", "body"))
        flow += _table(unobserved, [60, 70, WIDTH - 130])
    flow.append(_heading("Passes", 1))
    passes = text.pass_table(s)
    flow += _table(passes, _even(passes.header, 50))
    overhead = text.overhead_table(s)
    if overhead is not None:
        flow += _table(overhead)
    flow.append(_heading("Calibration findings", 1))
    findings = text.findings_table(s)
    result_fill: list[tuple[Any, ...]] = []
    for r, f in enumerate(s.findings, start=1):
        outcome = "not-observed" if f.met is None else ("pass" if f.met else "fail")
        fill = OUTCOME_FILL[outcome]
        result_fill.append(("BACKGROUND", (5, r), (5, r), fill))
    if findings.rows:
        flow.append(
            _grid(
                findings.header, findings.rows, [48, 44, 90, 75, 75, 48, WIDTH - 380], result_fill
            )
        )
    flow += [_p(note, "note") for note in findings.notes]
    return flow


def _limits() -> list[Flowable]:
    flow: list[Flowable] = [_heading("What this evidence cannot show", 0)]
    rows = [[name, why] for name, why in text.OBSERVER_LIMITS.items()]
    flow += [
        _grid(["observer", "limit"], rows, [60, WIDTH - 60], first_column_bold=True),
        Spacer(1, 6),
    ]
    flow += [_p(f"- {why}", "body") for why in text.GENERAL_LIMITS]
    flow.append(_p(text.EXIT_STATUS_STATEMENT, "box"))
    return flow


__all__ = ["render_pdf"]
