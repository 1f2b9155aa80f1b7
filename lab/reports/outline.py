"""The report's outline, once: which sections, in which order, made of which rows. The
Markdown, PDF and HTML presenters walk it and only draw.

    for section in run_outline(run, files):
        if VIEW in section.views:
            draw_heading(section.title, section.level, section.anchor)
            for block in section.blocks:
                if VIEW in block.views:
                    draw(block)

A block is a sentence (:class:`Text`), bullets, a :class:`~lab.reports.table.Table` (with
the PDF's column widths as fractions of the text width), a verbatim tool output, a chart
(drawn as a chart where a view can, else as its table), the verdict matrix, or the archived
files a scenario's raw evidence lives in. ``views`` says where a block is drawn: the PDF, a
digest read in ten minutes, leaves each invocation's records to report.md and report.html.
The rows themselves are built by the modules named for what they describe; the campaign and
evaluation sections by :mod:`lab.reports.outline_parts`.
"""

from __future__ import annotations

from lab.model import CLAUSE_TITLES, CLAUSES, RunResult
from lab.reports import ArchivedFile, charts
from lab.reports.files import files_table
from lab.reports.outline_scenario import (
    campaign_sections,
    cpu_chart,
    cpu_matters,
    evaluation_sections,
    scenario_sections,
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
    collectors_unavailable,
    collectors_used,
    concurrency_statement,
    identity_rows,
    observer_table,
    run_status_statement,
    sessions_statement,
    signing_key_statement,
    signing_statement,
)
from lab.reports.shards import has_shards, shard_statement, shards_table
from lab.reports.table import Table, sentence
from lab.reports.view import (
    ALL,
    PDF,
    PDF_POINTS,
    RECORDS,
    Block,
    Bullets,
    Chart,
    Matrix,
    Section,
    TableBlock,
    Text,
    View,
    widths,
)

__all__ = ["ALL", "Section", "View", "run_outline"]


def run_outline(run: RunResult, files: list[ArchivedFile] | None) -> list[Section]:
    """Every section of a run's report, in reading order: the verdict first."""
    out = [verdict_section(run), contract_section(), observers_section(run)]
    out += repetitions_sections(run)
    out += shards_sections(run)
    out.append(figures_section(run))
    if run.evaluation is not None:
        out += evaluation_sections(run.evaluation)
    if run.campaign is not None:
        out += campaign_sections(run.campaign)
    for scenario in run.scenarios:
        out += scenario_sections(run, scenario, files)
    out.append(limits_section())
    out.append(identity_section(run))
    files_blocks: list[Block] = [
        TableBlock(files_table(files), code_columns=frozenset({2}), views=RECORDS),
        TableBlock(
            files_table(files, grouped=True),
            (0.36, 0.11, 0.53),
            views=PDF,
        ),
    ]
    out.append(Section("Archived files", 0, files_blocks, keep=120))
    return out


#: identity rows the PDF leaves to report.md and report.html: the sandbox's settings and the
#: time base's offsets (each a row per field), and the observers' rows page 2 already holds
_RECORDS_ONLY_IDENTITY = (
    "sandbox",
    "time base",
    "collectors used",
    "collectors unavailable",
    "passes at once",
    "bpftrace sessions",
)


def identity_section(run: RunResult) -> Section:
    rows = [list(r) for r in identity_rows(run)]
    short = [r for r in rows if not r[0].startswith(_RECORDS_ONLY_IDENTITY)]
    blocks: list[Block] = [TableBlock(Table(["item", "value"], rows), views=RECORDS)]
    blocks.append(TableBlock(Table(["item", "value"], short), widths(165), views=PDF))
    if len(short) < len(rows):
        blocks.append(
            Text(
                "The sandbox's settings and the time base's offsets (and their uncertainty) "
                "are in this section of report.md and report.html; the observers' rows are "
                "in 'Observers' above.",
                "note",
                views=PDF,
            )
        )
    return Section("Identity of the run", 0, blocks, keep=120)


def verdict_section(run: RunResult) -> Section:
    blocks: list[Block] = []
    if run.incomplete is not None:
        why = str(run.incomplete.get("reason", "interrupted"))
        blocks.append(
            Text(
                f"INCOMPLETE: this run was interrupted ({why}); what follows covers only "
                "what finished, and the run was neither signed nor packed.",
                "box",
            )
        )
    if run.evaluation is not None:  # its presenter only where there is one to present
        from lab.reports.evaluation import evaluation_exit_statement, evaluation_headline

        headline = evaluation_headline(run.evaluation)
        if headline is not None:
            exit_statement = evaluation_exit_statement(run.evaluation)
            blocks += [Text(headline, "strong"), Text(exit_statement, "box")]
    blocks += [
        Text(f"Calibration score: {calibration_statement(run.calibration)}.", "strong"),
        Text(run_status_statement(run)),
        Matrix(run),
        Text(signing_key_statement(run.signing), "strong"),
    ]
    statement = signing_statement(run.signing)
    if statement:
        blocks.append(Text(statement))
    blocks.append(Text(EXIT_STATUS_STATEMENT, "box"))
    blocks.append(
        Text(
            "The run's identity and environment (commit, image, kernel, tools, options) are "
            "in the last sections, 'Identity of the run' and 'Archived files' (every file "
            "with its SHA-256); each invocation's records are in report.md and report.html.",
            "note",
            views=PDF,
        )
    )
    return Section("Verdict", 0, blocks)


def contract_section() -> Section:
    rows = [[c, CLAUSE_TITLES[c]] for c in CLAUSES]
    return Section(
        "The contract", 0, [TableBlock(Table(["clause", "requirement"], rows), widths(40))]
    )


def observers_section(run: RunResult) -> Section:
    blocks: list[Block] = [
        Text(sentence(f"Collectors used: {collectors_used(run)}")),
        Text(sentence(f"Unavailable: {collectors_unavailable(run)}")),
        Text(sentence(f"Passes at once: {concurrency_statement(run)}")),
    ]
    sessions = sessions_statement(run)
    if sessions is not None:
        blocks.append(Text(sentence(f"bpftrace sessions: {sessions}")))
    blocks.append(TableBlock(observer_table(run), widths(55, 65, 150)))
    return Section("Observers", 0, blocks)


def figures_section(run: RunResult) -> Section:
    blocks: list[Block] = []
    source = charts.source_bytes_chart(run)
    if source is None:
        blocks.append(
            Text("Logical source bytes read: not observed (strace observed no invocation).")
        )
    overhead = charts.overhead_charts(run)
    found = [source, charts.connections_chart(run), charts.payload_chart(run), *overhead[:1]]
    blocks += [Chart(c) for c in found if c is not None]
    # the PDF draws the wall-time overhead; the CPU-time one (a diagnostic of the
    # instrument, not of the client) is drawn in report.md and report.html
    blocks += [Chart(c, views=RECORDS) for c in overhead[1:]]
    if not overhead:
        blocks.append(
            Text(
                "Tracing overhead: not observed (no scenario has both an untraced and a "
                "traced pass)."
            )
        )
    blocks += cpu_blocks(run)
    return Section("Figures", 0, blocks)


def cpu_blocks(run: RunResult) -> list[Block]:
    """The figures' word on CPU samples: the PDF draws each chart in the section of a
    scenario whose expectations concern CPU (:func:`cpu_matters`); report.md and report.html
    keep every scenario's symbol table in its section."""
    cpu = [s for s in charts.first_repetitions(run) if cpu_chart(run, s) is not None]
    if not cpu:
        return [Text("CPU samples by symbol: not observed (perf observed no invocation).")]
    drawn = [s.name for s in cpu if cpu_matters(s)]
    where = (
        f"The PDF draws them for {', '.join(drawn)}, whose expectations concern CPU, in "
        "those scenarios' sections"
        if drawn
        else "No scenario's expectations concern CPU, so the PDF draws none"
    )
    chart = cpu_chart(run, cpu[0])
    caption = "" if chart is None else f" {chart.caption}"
    return [
        Text(
            f"CPU samples by symbol (perf): {where}; every scenario's symbol table is in "
            f"report.md and report.html.{caption}",
            "note",
            views=PDF,
        )
    ]


def repetitions_sections(run: RunResult) -> list[Section]:
    if not has_repetitions(run):
        return [Section("Repetitions", 0, [Text(SINGLE_RUN_STATEMENT)], keep=120)]
    clause_w = [(PDF_POINTS - 70 - 18 - 80 - 58 - 58) / len(CLAUSES)] * len(CLAUSES)
    blocks: list[Block] = []
    if run.aggregate:
        blocks.append(TableBlock(aggregate_table(run), widths(70, 18, *clause_w, 80, 58)))
    out = [Section("Repetitions", 0, blocks, keep=120)]
    rep_w = [(PDF_POINTS - 50 - 100 - 60 - 90) / len(CLAUSES)] * len(CLAUSES)
    for name in repeated_names(run):
        table = TableBlock(repetition_table(run, name), widths(50, *rep_w, 100, 60))
        out.append(Section(f"Per repetition: {name}", 1, [table]))
    return out


def shards_sections(run: RunResult) -> list[Section]:
    if not has_shards(run):
        return []
    blocks: list[Block] = []
    statement = shard_statement(run)
    if statement:
        blocks.append(Text(statement))
    if run.shards:
        blocks.append(TableBlock(shards_table(run), widths(30, 80, 110, 90, 70, 60)))
    return [Section("Shards", 0, blocks, keep=120)]


def limits_section() -> Section:
    rows = [[name, why] for name, why in OBSERVER_LIMITS.items()]
    blocks: list[Block] = [
        TableBlock(Table(["observer", "limit"], rows), widths(60)),
        Bullets(tuple(GENERAL_LIMITS)),
    ]
    return Section("What this evidence cannot show", 0, blocks, keep=120)
