"""The PDF report: a reader's digest, page 1 the verdict (the calibration score, the
colour-coded verdict matrix, the signing key id and what the exit status means), then the
observers, the charts, each scenario's verdicts, findings and passes, the limits, the run's
identity and the archived files. It walks the report's outline (:mod:`lab.reports.outline`)
and draws the blocks meant for it; each invocation's records (client claim, receiver, decoy,
verifier, each observer's summary) are in ``report.md`` and ``report.html``, so that a
standard run reads in ten minutes. Byte-for-byte reproducible for the same input: reportlab
runs in invariant mode, the fonts are embedded subsets with numbered names, and the document
date (and the /ID it seeds) is the run's ``finished_at``.

    from lab.reports.pdf import render_pdf
    render_pdf(run, run_dir / "report.pdf", files=files)

The flowables, styles and the document itself are :mod:`lab.reports.pdf_blocks`.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reportlab.lib import colors
from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    KeepTogether,
    PageBreak,
    Paragraph,
    Spacer,
    Table,
    TableStyle,
)

from lab.model import CLAUSES, RunResult, Verdict
from lab.reports import ArchivedFile, charts, fonts, pdf_charts
from lab.reports.outline import run_outline
from lab.reports.pdf_blocks import (
    CELL_FONT,
    GRID,
    HEADER_FILL,
    MARGIN,
    MISMATCH_EDGE,
    OUTCOME_FILL,
    PAGE,
    STYLES,
    WIDTH,
    Document,
    Para,
    document_date,
    epoch_of,
    footer,
    heading,
    para,
    table_flow,
    verbatim,
)
from lab.reports.pdf_swimlane import swimlane_flow
from lab.reports.run import (
    clause_name,
    run_name,
    scenario_label,
)
from lab.reports.swimlanes import Swimlane, lanes_of, swimlanes
from lab.reports.table import NOT_RECORDED
from lab.reports.text import pdf_text as escape
from lab.reports.view import (
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


def render_pdf(
    run: RunResult,
    out: Path,
    *,
    files: list[ArchivedFile] | None,
    timeline: Iterable[Mapping[str, Any]] = (),
    outline: list[Section] | None = None,
) -> None:
    """Write the PDF report of ``run`` to ``out`` (the same bytes for the same input);
    ``timeline``: timeline.jsonl's rows, for the swimlane charts; ``outline``: another
    record's sections (a fixture task's, :mod:`lab.reports.task`) instead of the run's."""
    fonts.register()
    buffer = io.BytesIO()
    doc = Document(
        buffer,
        pagesize=PAGE,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN + 4,
        bottomMargin=MARGIN + 4,
        title=f"Execution Evidence Lab report: {run_name(run.run_id)}",
        author="Execution Evidence Lab",
        subject="Independent evidence for a backup client's claims",
        creator="lab.reports.pdf",
        lang="en",
        initialFontName=fonts.SANS,
        displayDocTitle=1,
        invariant=1,
    )
    sections = run_outline(run, files) if outline is None else outline
    story = _story(run, sections, swimlanes(timeline))
    draw_footer = footer(run_name(run.run_id))
    with document_date(epoch_of(run.finished_at)):
        doc.build(story, onFirstPage=draw_footer, onLaterPages=draw_footer)
    out.write_bytes(buffer.getvalue())


def _story(run: RunResult, sections: list[Section], lanes: list[Swimlane]) -> list[Flowable]:
    story: list[Flowable] = [
        Para("Execution Evidence Lab report", STYLES["title"]),
        para(f"{run.started_at} to {run.finished_at}: {run_name(run.run_id)}", "body"),
    ]
    for number, section in enumerate(sections):
        if "pdf" not in section.views:
            continue
        blocks = [b for b in section.blocks if "pdf" in b.views]
        if not blocks and section.level > 0:
            continue
        if section.keep:
            story.append(CondPageBreak(section.keep))
        title = heading(section.title, section.level, keep_with_next=not section.keep)
        groups = [_block(block, lanes) for block in blocks]
        if groups and isinstance(blocks[0], Chart):
            # the heading travels with the first figure: never alone at the foot of a page
            groups[0] = [title, *groups[0]]
        else:
            story.append(title)
        story += [
            KeepTogether(group) if isinstance(block, Chart) else flow
            for block, group in zip(blocks, groups, strict=True)
            for flow in ([group] if isinstance(block, Chart) else group)
        ]
        if number == 0:
            story.append(PageBreak())  # page 1 is the verdict alone
    return story


def _block(block: Block, lanes: list[Swimlane]) -> list[Flowable]:
    if isinstance(block, Text):
        return [para(block.text, block.style)]
    if isinstance(block, Bullets):
        return [para(f"- {item}", "body") for item in block.items]
    if isinstance(block, TableBlock):
        cols = None if block.widths is None else [w * WIDTH for w in block.widths]
        caption = [para(block.caption, "body")] if block.caption else []
        return caption + table_flow(block.table, cols, colour_outcomes=True)
    if isinstance(block, Verbatim):
        return [para(block.caption, "body"), verbatim(block.text), Spacer(1, 6)]
    if isinstance(block, Chart):
        return _chart(block.chart, caption=block.caption)
    if isinstance(block, Matrix):
        return _matrix(block.run)
    if isinstance(block, Swimlanes):
        return swimlane_flow(lanes_of(lanes, block.scenario, block.repetition))
    if isinstance(block, RawFiles):
        return []
    raise TypeError(f"no PDF drawing for {type(block).__name__}")


def _matrix_cell(verdict: Verdict | None) -> Paragraph:
    if verdict is None:
        return para(NOT_RECORDED)
    if verdict.expected is None:
        second = "no expectation"
    elif verdict.agrees is False:
        second = f"<b>MISMATCH</b>: expected {escape(verdict.expected)}"
    elif verdict.agrees:
        second = "as expected"
    else:
        second = f"expected {escape(verdict.expected)}"
    return Para(
        f"<font size=6.6><b>{escape(verdict.observed)}</b></font><br/><font size=6>{second}</font>",
        STYLES["cell"],
    )


def _matrix(run: RunResult) -> list[Flowable]:
    flow: list[Flowable] = [
        heading("Verdict matrix", 0),
        para(
            "Rows are scenarios, columns the contract clauses (C1-C6, overleaf). Each cell: "
            "the observed outcome, and whether the scenario file expected it. Not observed "
            "means the evidence needed was unavailable: never counted as a pass, a fail or a "
            "zero. A thick red frame marks an observation that disagrees with its expectation.",
            "body",
        ),
    ]
    label_w, cal_w = 88.0, 62.0
    clause_w = (WIDTH - label_w - cal_w) / len(CLAUSES)
    data: list[list[Flowable]] = [
        [
            para("scenario", "cellhead"),
            *(
                Para(f"<b>{c}</b><br/><font size=6>{escape(clause_name(c))}</font>", STYLES["cell"])
                for c in CLAUSES
            ),
            para("calibration", "cellhead"),
        ]
    ]
    extra: list[tuple[Any, ...]] = []
    for r, s in enumerate(run.scenarios, start=1):
        cal = s.calibration
        row: list[Flowable] = [para(scenario_label(s, run), "cellhead")]
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
        counts = (
            f"{cal.met}/{cal.total} met<br/>{cal.not_met} not met<br/>"
            f"{cal.not_observed} not observed"
        )
        row.append(
            Para(
                f"<font size=6.5>{counts}</font>",
                STYLES["strongcell" if cal.not_met else "cell"],
            )
        )
        data.append(row)
    table = Table(data, colWidths=[label_w] + [clause_w] * len(CLAUSES) + [cal_w], repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                CELL_FONT,
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
    return [*flow, table, Spacer(1, 5), _legend(), Spacer(1, 5)]


def _legend() -> Table:
    cells = [
        para("pass", "cellhead"),
        para("fail", "cellhead"),
        para("not observed", "cellhead"),
        para("not exercised", "cellhead"),
        para("observation disagrees with expectation", "cellhead"),
    ]
    table = Table([cells], colWidths=[60, 60, 80, 80, 170])
    table.setStyle(
        TableStyle(
            [
                CELL_FONT,
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


def _chart(chart: charts.BarChart, *, caption: bool = True) -> list[Flowable]:
    """A chart and its caption and notes, as one group to keep on one page."""
    parts: list[Flowable] = [pdf_charts.draw(chart, WIDTH), Spacer(1, 3)]
    if caption:
        parts.append(para(chart.caption, "note"))
    parts += [para(note, "note") for note in chart.notes]
    parts.append(Spacer(1, 8))
    return parts


__all__ = ["render_pdf"]
