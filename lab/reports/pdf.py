"""The PDF report: a reader's digest of the content of ``report.md``, drawn from the same
rows. Page 1 is the verdict: the calibration score, the colour-coded verdict matrix, the
signing key id and what the exit status means. Then the observers, the charts, each
scenario's verdicts, findings and passes, the limits, and in appendices the run's identity
and environment and the archived files. The per-invocation records (client claim, receiver,
decoy, verifier, each observer's summary) are in ``report.md`` only, so that a standard run
reads in ten minutes. Byte-for-byte reproducible for the same input: reportlab runs in
invariant mode, the fonts are embedded subsets with numbered names, and the document date
(and the /ID it seeds) is the run's ``finished_at``.

    from lab.reports.pdf import render_pdf
    render_pdf(run, run_dir / "report.pdf", files=files)

Sections are built here from the rows the Markdown report draws too; the flowables, styles
and the document itself are :mod:`lab.reports.pdf_blocks`.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

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

from lab.model import CLAUSE_TITLES, CLAUSES, RunResult, ScenarioResult, Verdict
from lab.model.evaluation import Evaluation
from lab.reports import ArchivedFile, charts, fonts
from lab.reports.campaign_pdf import campaign_flow
from lab.reports.evaluation import (
    EVALUATION_EXIT_STATEMENT,
    evaluation_clause_table,
    evaluation_diagnostics_table,
    evaluation_frozen_files,
    evaluation_headline,
    evaluation_identity,
    evaluation_other_rows,
    evaluation_refusal,
    evaluation_timing_table,
)
from lab.reports.files import files_table
from lab.reports.observers import unobserved_table
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
    document_date,
    epoch_of,
    even_widths,
    footer,
    grid,
    heading,
    pairs,
    para,
    table_flow,
)
from lab.reports.repetitions import (
    SINGLE_RUN_STATEMENT,
    aggregate_table,
    has_repetitions,
    repeated_names,
    repetition_table,
)
from lab.reports.run import (
    EXIT_STATUS_STATEMENT,
    GENERAL_LIMITS,
    OBSERVER_LIMITS,
    calibration_statement,
    clause_name,
    collectors_unavailable,
    collectors_used,
    concurrency_statement,
    identity_rows,
    observer_table,
    run_name,
    run_status_statement,
    scenario_label,
    sessions_statement,
    signing_key_statement,
    signing_statement,
)
from lab.reports.scenario import (
    findings_table,
    overhead_table,
    pass_table,
    records_elsewhere,
    verdict_table,
)
from lab.reports.shards import has_shards, shard_statement, shards_table
from lab.reports.table import NOT_RECORDED, fmt_seconds, sentence


def render_pdf(run: RunResult, out: Path, *, files: list[ArchivedFile] | None) -> None:
    """Write the PDF report of ``run`` to ``out`` (the same bytes for the same input)."""
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
    story = _story(run, files)
    draw_footer = footer(run_name(run.run_id))
    with document_date(epoch_of(run.finished_at)):
        doc.build(story, onFirstPage=draw_footer, onLaterPages=draw_footer)
    out.write_bytes(buffer.getvalue())


def _story(run: RunResult, files: list[ArchivedFile] | None) -> list[Flowable]:
    story = _verdict_page(run)
    story.append(PageBreak())
    story += _contract()
    story += _observers(run)
    story += _figures(run)
    story += _repetitions(run)
    story += _shards(run)
    if run.evaluation is not None:
        story += _evaluation(run.evaluation)
    if run.campaign is not None:
        story += campaign_flow(run.campaign)
    for scenario in run.scenarios:
        story += _scenario(run, scenario)
    story += _limits()
    story += [CondPageBreak(200), heading("Appendix A: identity of the run", 0)]
    story += pairs(identity_rows(run), label=165)
    story += [CondPageBreak(120), heading("Appendix B: archived files", 0)]
    story += table_flow(
        files_table(files, grouped=True), [WIDTH * 0.36, WIDTH * 0.11, WIDTH * 0.53]
    )
    return story


def _verdict_page(run: RunResult) -> list[Flowable]:
    """Page 1: did the instrument see what it should, and what did each scenario do."""
    story: list[Flowable] = [
        Paragraph("Execution Evidence Lab report", STYLES["title"]),
        para(f"{run.started_at} to {run.finished_at}: {run_name(run.run_id)}", "body"),
    ]
    headline = evaluation_headline(run.evaluation)
    if headline is not None:
        story += [para(headline, "strong"), para(EVALUATION_EXIT_STATEMENT, "box")]
    story += [
        para(f"Calibration score: {calibration_statement(run.calibration)}.", "strong"),
        para(run_status_statement(run), "body"),
    ]
    story += _matrix(run)
    story.append(para(signing_key_statement(run.signing), "strong"))
    statement = signing_statement(run.signing)
    if statement:
        story.append(para(statement, "body"))
    story.append(para(EXIT_STATUS_STATEMENT, "box"))
    story.append(
        para(
            "The run's identity and environment (commit, image, kernel, tools, options) are "
            "in Appendix A; every file of the archive with its SHA-256 in Appendix B; each "
            "invocation's records in report.md.",
            "note",
        )
    )
    return story


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
    return Paragraph(
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
                Paragraph(
                    f"<b>{c}</b><br/><font size=6>{escape(clause_name(c))}</font>", STYLES["cell"]
                )
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
            Paragraph(
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


def _contract() -> list[Flowable]:
    return [
        heading("The contract", 0),
        grid(
            ["clause", "requirement"],
            [[c, CLAUSE_TITLES[c]] for c in CLAUSES],
            [40, WIDTH - 40],
            first_column_bold=True,
        ),
        Spacer(1, 6),
    ]


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


def _observers(run: RunResult) -> list[Flowable]:
    flow: list[Flowable] = [
        heading("Observers", 0),
        para(sentence(f"Collectors used: {collectors_used(run)}"), "body"),
        para(sentence(f"Unavailable: {collectors_unavailable(run)}"), "body"),
        para(sentence(f"Passes at once: {concurrency_statement(run)}"), "body"),
    ]
    sessions = sessions_statement(run)
    if sessions is not None:
        flow.append(para(sentence(f"bpftrace sessions: {sessions}"), "body"))
    flow += table_flow(observer_table(run), [55, 65, 150, WIDTH - 270])
    return flow


def _chart(chart: charts.BarChart, *, caption: bool = True) -> list[Flowable]:
    """A chart and its caption and notes, as one group to keep on one page."""
    parts: list[Flowable] = [charts.draw(chart, WIDTH), Spacer(1, 3)]
    if caption:
        parts.append(para(chart.caption, "note"))
    parts += [para(note, "note") for note in chart.notes]
    parts.append(Spacer(1, 8))
    return parts


def _figures(run: RunResult) -> list[Flowable]:
    groups: list[list[Flowable]] = []
    source = charts.source_bytes_chart(run)
    groups.append(
        _chart(source)
        if source
        else [
            para("Logical source bytes read: not observed (strace observed no invocation).", "body")
        ]
    )
    for chart in (charts.connections_chart(run), charts.payload_chart(run)):
        if chart is not None:
            groups.append(_chart(chart))
    overhead = charts.overhead_charts(run)
    if not overhead:
        groups.append(
            [
                para(
                    "Tracing overhead: not observed (no scenario has both an untraced and "
                    "a traced pass).",
                    "body",
                )
            ]
        )
    groups += [_chart(c) for c in overhead]
    cpu = [
        chart
        for s in charts.first_repetitions(run)
        if (chart := charts.perf_symbols_chart(s, s.name, client=_client_name(run))) is not None
    ]
    if not cpu:
        groups.append(
            [para("CPU samples by symbol: not observed (perf observed no invocation).", "body")]
        )
    else:
        # one caption for every CPU chart, kept with the first of them
        groups.append([para(cpu[0].caption, "note"), *_chart(cpu[0], caption=False)])
        groups += [_chart(c, caption=False) for c in cpu[1:]]
    # the heading travels with the first figure: never alone at the foot of a page (and no
    # KeepTogether inside another: reportlab then measures the outer one as never fitting)
    groups[0] = [heading("Figures", 0), *groups[0]]
    return [KeepTogether(group) for group in groups]


def _client_name(run: RunResult) -> str | None:
    """The client binary's file name as perf names its DSO (the run's own record)."""
    name = run.environment.get("client")
    return name if isinstance(name, str) and name else None


def _repetitions(run: RunResult) -> list[Flowable]:
    flow: list[Flowable] = [CondPageBreak(120), heading("Repetitions", 0)]
    if not has_repetitions(run):
        return [*flow, para(SINGLE_RUN_STATEMENT, "body")]
    if run.aggregate:
        rest = WIDTH - 70 - 18 - 80 - 58 - 58
        flow += table_flow(
            aggregate_table(run), [70, 18, *([rest / len(CLAUSES)] * len(CLAUSES)), 80, 58, 58]
        )
    for name in repeated_names(run):
        flow.append(heading(f"Per repetition: {name}", 1))
        rest = WIDTH - 50 - 100 - 60 - 90
        flow += table_flow(
            repetition_table(run, name),
            [50, *([rest / len(CLAUSES)] * len(CLAUSES)), 100, 60, 90],
            colour_outcomes=True,
        )
    return flow


def _shards(run: RunResult) -> list[Flowable]:
    if not has_shards(run):
        return []
    flow: list[Flowable] = [CondPageBreak(120), heading("Shards", 0)]
    statement = shard_statement(run)
    if statement:
        flow.append(para(statement, "body"))
    if run.shards:
        flow += table_flow(shards_table(run), [30, 80, 110, 90, 70, 60, WIDTH - 440])
    return flow


def _evaluation(evaluation: Evaluation) -> list[Flowable]:
    flow: list[Flowable] = [CondPageBreak(200), heading("Candidate evaluation", 0)]
    refusal = evaluation_refusal(evaluation)
    if refusal:
        flow.append(para(refusal, "box"))
    flow += pairs(evaluation_identity(evaluation))
    clauses = evaluation_clause_table(evaluation)
    if clauses is not None:
        flow.append(heading("Clauses over the evaluation's repetitions", 1))
        flow += table_flow(clauses, [35, 200, 120, WIDTH - 355])
    timing = evaluation_timing_table(evaluation)
    if timing is not None:
        flow.append(heading("Timing (untraced)", 1))
        flow += table_flow(timing, [105, 125, 125, 45, WIDTH - 400])
    diagnostics = evaluation_diagnostics_table(evaluation)
    if diagnostics is not None:
        flow.append(heading("Diagnostics (traced, no threshold)", 1))
        flow += table_flow(diagnostics, [70, 35, 30, 75, 60, 60, 60, WIDTH - 390])
    frozen = evaluation_frozen_files(evaluation)
    if frozen is not None:
        flow.append(heading("What was frozen before the candidate ran", 1))
        flow += table_flow(frozen, [WIDTH - 270, 270])
    other = evaluation_other_rows(evaluation)
    if other:
        flow.append(heading("Other recorded fields", 1))
        flow += pairs(other)
    return flow


def _scenario(run: RunResult, s: ScenarioResult) -> list[Flowable]:
    """One scenario: its verdicts, calibration findings and passes. Each invocation's
    records are in report.md (the note says where), so a scenario takes about a page."""
    label = scenario_label(s, run)
    flow: list[Flowable] = [
        CondPageBreak(260),
        heading(f"Scenario {label}", 0),
        para(s.description, "body"),
        para(
            f"Scenario file {s.scenario_file}, repetition {s.repetition}, lab wall time "
            f"{fmt_seconds(s.wall_s)}. Calibration: "
            f"{calibration_statement(s.calibration)}.",
            "body",
        ),
    ]
    if s.error:
        flow.append(para(sentence(f"The scenario did not complete: {s.error}"), "box"))
    flow.append(heading("Verdicts", 1))
    verdicts = verdict_table(s)
    fills: list[tuple[Any, ...]] = []
    for r, clause in enumerate(CLAUSES, start=1):
        v = s.verdicts.get(clause)
        if v is not None:
            fills.append(("BACKGROUND", (3, r), (3, r), OUTCOME_FILL.get(v.observed, colors.white)))
            if v.agrees is False:
                fills.append(("BOX", (3, r), (4, r), 2.0, MISMATCH_EDGE))
    flow.append(
        grid(
            verdicts.header,
            verdicts.rows,
            [34, 96, 44, 52, 50, 62, WIDTH - 338],
            fills,
            first_column_bold=True,
        )
    )
    findings = findings_table(s, observed_only=True)
    if findings.rows or findings.notes:
        flow.append(heading("Calibration findings", 1))
    result_fill: list[tuple[Any, ...]] = []
    for r, f in enumerate((f for f in s.findings if f.met is not None), start=1):
        result_fill.append(
            ("BACKGROUND", (5, r), (5, r), OUTCOME_FILL["pass" if f.met else "fail"])
        )
    if findings.rows:
        flow.append(
            grid(findings.header, findings.rows, [46, 50, 96, 70, 70, 42, WIDTH - 374], result_fill)
        )
    flow += [para(note, "note") for note in findings.notes]
    unobserved = unobserved_table(s)
    if unobserved is not None:
        flow.append(para("Observers that did not observe this scenario:", "body"))
        flow += table_flow(unobserved, [60, 70, WIDTH - 130])
    flow.append(heading("Passes", 1))
    passes = pass_table(s)
    flow += table_flow(passes, even_widths(passes.header, 50))
    overhead = overhead_table(s)
    if overhead is not None:
        flow += table_flow(overhead)
    flow.append(para(records_elsewhere(s, label), "note"))
    return flow


def _limits() -> list[Flowable]:
    flow: list[Flowable] = [CondPageBreak(200), heading("What this evidence cannot show", 0)]
    rows = [[name, why] for name, why in OBSERVER_LIMITS.items()]
    flow += [
        grid(["observer", "limit"], rows, [60, WIDTH - 60], first_column_bold=True),
        Spacer(1, 6),
    ]
    flow += [para(f"- {why}", "body") for why in GENERAL_LIMITS]
    flow.append(para(EXIT_STATUS_STATEMENT, "box"))
    return flow


__all__ = ["render_pdf"]
