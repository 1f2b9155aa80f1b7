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

from lab.model import CLAUSE_TITLES, CLAUSES, RunResult, ScenarioResult
from lab.reports import ArchivedFile, charts
from lab.reports.files import files_table
from lab.reports.outline_scenario import (
    campaign_sections,
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
    out.append(figures_section(run))
    out += repetitions_sections(run)
    out += shards_sections(run)
    if run.evaluation is not None:
        out += evaluation_sections(run.evaluation)
    if run.campaign is not None:
        out += campaign_sections(run.campaign)
    for scenario in run.scenarios:
        out += scenario_sections(run, scenario, files)
    out.append(limits_section())
    out.append(
        Section(
            "Identity of the run",
            0,
            [
                TableBlock(
                    Table(["item", "value"], [list(r) for r in identity_rows(run)]), widths(165)
                )
            ],
            keep=200,
        )
    )
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


def verdict_section(run: RunResult) -> Section:
    from lab.reports.evaluation import EVALUATION_EXIT_STATEMENT, evaluation_headline

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
    headline = evaluation_headline(run.evaluation)
    if headline is not None:
        blocks += [Text(headline, "strong"), Text(EVALUATION_EXIT_STATEMENT, "box")]
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
    found = [source, charts.connections_chart(run), charts.payload_chart(run), *overhead]
    blocks += [Chart(c) for c in found if c is not None]
    if not overhead:
        blocks.append(
            Text(
                "Tracing overhead: not observed (no scenario has both an untraced and a "
                "traced pass)."
            )
        )
    client = run.environment.get("client")
    cpu = [
        (s, chart)
        for s in charts.first_repetitions(run)
        if (
            chart := charts.perf_symbols_chart(
                s, s.name, client=client if isinstance(client, str) and client else None
            )
        )
        is not None
    ]
    if not cpu:
        blocks.append(Text("CPU samples by symbol: not observed (perf observed no invocation)."))
    else:
        # one caption for every CPU chart; report.md and report.html keep the per-scenario
        # symbol tables in each scenario's section instead. The PDF's page budget holds the
        # CPU_CHARTS scenarios that spent the most CPU time (the most telling: a client
        # that spins or re-hashes), and says which it left out
        shown = sorted(cpu, key=lambda pair: -_cpu_time(pair[0]))[:CPU_CHARTS]
        blocks.append(Text(cpu[0][1].caption, "note", views=PDF))
        blocks += [Chart(c, caption=False, views=PDF) for s, c in cpu if (s, c) in shown]
        left = [s.name for s, _c in cpu if all(s is not t for t, _ in shown)]
        if left:
            blocks.append(
                Text(
                    f"CPU samples of {', '.join(left)}: in report.md and report.html, each "
                    "scenario's section (this report draws the scenarios that spent the most "
                    "CPU time).",
                    "note",
                    views=PDF,
                )
            )
    return Section("Figures", 0, blocks)


#: CPU charts the PDF draws (of the scenarios that spent the most CPU time)
CPU_CHARTS = 2


def _cpu_time(s: ScenarioResult) -> float:
    primary = s.primary
    if primary is None:
        return 0.0
    return sum(inv.claim.cpu_s or 0.0 for inv in primary.invocations)


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
    return Section("What this evidence cannot show", 0, blocks, keep=200)
