"""The Markdown report: GitHub-flavoured, deterministic, no host paths.

    from lab.reports.markdown import render_markdown
    (run_dir / "report.md").write_text(render_markdown(run, files=files), encoding="utf-8")

The same content as the PDF (``lab.reports.pdf``), drawn from the same rows (``run``,
``scenario``, ``observers``, ``repetitions``, ``evaluation``, ``files`` beside it); where the
PDF has a chart, this report has the chart's figures as a table.
"""

from __future__ import annotations

from lab.model import CLAUSE_TITLES, CLAUSES, RunResult, ScenarioResult
from lab.model.campaign import CampaignRecord
from lab.model.evaluation import Evaluation
from lab.reports import ArchivedFile, charts
from lab.reports.campaign import (
    CAMPAIGN_EXIT_STATEMENT,
    campaign_headline,
    campaign_sections,
)
from lab.reports.campaign import identity_rows as campaign_identity
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
from lab.reports.observers import (
    flows_table,
    observed_any,
    observer_names,
    observer_summary_table,
    probe_maps,
    top_symbols_table,
    unobserved_table,
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
    matrix_cell,
    observer_table,
    run_name,
    run_status_statement,
    scenario_label,
    sessions_statement,
    signing_statement,
)
from lab.reports.scenario import (
    client_table,
    decoy_table,
    findings_table,
    overhead_table,
    pass_table,
    receiver_table,
    records_note,
    verdict_table,
    verifier_table,
)
from lab.reports.shards import has_shards, shard_statement, shards_table
from lab.reports.table import NOT_OBSERVED, Table, fmt_seconds, sentence


def render_markdown(run: RunResult, *, files: list[ArchivedFile] | None) -> str:
    out: list[str] = []
    out += _heading(run)
    out += _matrix(run)
    out += _observers(run)
    out += _figures(run)
    out += _repetitions(run)
    out += _shards(run)
    if run.evaluation is not None:
        out += _evaluation(run.evaluation)
    if run.campaign is not None:
        out += _campaign(run.campaign)
    for scenario in run.scenarios:
        out += _scenario(run, scenario)
    out += _limits()
    out += ["## Archived files", ""]
    out += _table(files_table(files), code_columns={2})
    return "\n".join(out).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- drawing


def _cell(value: str) -> str:
    """A GFM table cell: pipes escaped, line breaks as <br>."""
    return value.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def _code(value: str) -> str:
    return f"`{value}`" if value and "`" not in value else value


def _table(table: Table, *, code_columns: set[int] | None = None) -> list[str]:
    code_columns = code_columns or set()
    lines = []
    if table.rows:
        lines.append("| " + " | ".join(_cell(h) for h in table.header) + " |")
        lines.append("|" + "|".join(" --- " for _ in table.header) + "|")
        for row in table.rows:
            cells = [
                _code(_cell(c)) if i in code_columns and _looks_like_digest(c) else _cell(c)
                for i, c in enumerate(row)
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    for note in table.notes:
        lines += [f"_{_escape(note)}_", ""]
    return lines


def _looks_like_digest(value: str) -> bool:
    return len(value) >= 40 and all(c in "0123456789abcdef:sha" for c in value)


def _escape(value: str) -> str:
    for ch in ("\\", "*", "_", "`"):
        value = value.replace(ch, "\\" + ch)
    return value


def _pairs(rows: list[tuple[str, str]], header: tuple[str, str] = ("", "")) -> list[str]:
    return _table(Table(list(header), [[k, v] for k, v in rows]))


# --------------------------------------------------------------------------- sections


def _heading(run: RunResult) -> list[str]:
    cal = run.calibration
    lines = [f"# Execution Evidence Lab report: {run_name(run.run_id)}", ""]
    if run.incomplete is not None:
        why = str(run.incomplete.get("reason", "interrupted"))
        lines += [
            f"**INCOMPLETE: this run was interrupted ({_escape(why)}); what follows covers only "
            "what finished, and the run was neither signed nor packed.**",
            "",
        ]
    headline = evaluation_headline(run.evaluation)
    if headline is not None:
        lines += [f"**{headline}**", "", f"> {EVALUATION_EXIT_STATEMENT}", ""]
    lines += [
        f"**Calibration: {calibration_statement(cal)}.**",
        "",
        run_status_statement(run),
        "",
        f"> **{EXIT_STATUS_STATEMENT}**",
        "",
        "## Identity of the run",
        "",
    ]
    lines += _pairs(identity_rows(run), ("item", "value"))
    statement = signing_statement(run.signing)
    if statement:
        lines += [f"**{statement}**", ""]
    return lines


def _matrix(run: RunResult) -> list[str]:
    lines = [
        "## Verdict matrix",
        "",
        "Each cell: the observed outcome, and whether it is what the scenario file expected. "
        "**MISMATCH** marks an observation that disagrees with its expectation; "
        "`not-observed` means the evidence needed was unavailable (the scenario section "
        "says why) and is never counted as a pass, a fail or a zero; `not-exercised` means "
        "the scenario never created the situation the clause is about (what could still be "
        "checked is in the reason).",
        "",
        "| scenario | " + " | ".join(CLAUSES) + " | calibration |",
        "|" + "|".join(" --- " for _ in range(len(CLAUSES) + 2)) + "|",
    ]
    for s in run.scenarios:
        cells = []
        for c in CLAUSES:
            cell = matrix_cell(s.verdicts.get(c))
            cells.append(_cell(cell.replace("MISMATCH", "**MISMATCH**")))
        cal = s.calibration
        lines.append(
            f"| [{scenario_label(s, run)}](#{_anchor(run, s)}) | "
            + " | ".join(cells)
            + f" | {cal.met}/{cal.total} met, {cal.not_met} not met, "
            f"{cal.not_observed} not observed |"
        )
    lines += ["", "Clauses:", ""]
    lines += [f"- **{c}** {CLAUSE_TITLES[c]}" for c in CLAUSES]
    lines += ["", f"**Calibration score: {calibration_statement(run.calibration)}.**", ""]
    return lines


def _anchor(run: RunResult, s: ScenarioResult) -> str:
    label = f"scenario {scenario_label(s, run)}".lower()
    return "".join(ch if ch.isalnum() or ch == "-" else ("-" if ch == " " else "") for ch in label)


def _observers(run: RunResult) -> list[str]:
    lines = [
        "## Observers",
        "",
        sentence(f"Collectors used: {collectors_used(run)}"),
        "",
        sentence(f"Unavailable: {collectors_unavailable(run)}"),
        "",
        sentence(f"Passes at once: {concurrency_statement(run)}"),
        "",
    ]
    sessions = sessions_statement(run)
    if sessions is not None:
        lines += [sentence(f"bpftrace sessions: {sessions}"), ""]
    return lines + _table(observer_table(run))


def _chart_table(chart: charts.BarChart) -> list[str]:
    header = ["scenario" if chart.categories else "", *(s.name for s in chart.series)]
    rows = [
        [cat, *(NOT_OBSERVED if v is None else charts.value_text(v, chart.unit) for v in vals)]
        for cat, vals in zip(chart.categories, chart.values, strict=True)
    ]
    lines = [f"### {chart.title}", ""]
    lines += _table(Table(header, rows, [chart.caption, *chart.notes]))
    return lines


def _figures(run: RunResult) -> list[str]:
    lines = ["## Figures", "", "The PDF report draws these figures as charts.", ""]
    found = [
        chart
        for chart in (
            charts.source_bytes_chart(run),
            charts.connections_chart(run),
            charts.payload_chart(run),
            *charts.overhead_charts(run),
        )
        if chart is not None
    ]
    if charts.source_bytes_chart(run) is None:
        lines += [
            "Logical source bytes read: not observed (strace observed no invocation).",
            "",
        ]
    if not charts.overhead_charts(run):
        lines += [
            "Tracing overhead: not observed (no scenario has both an untraced and a traced pass).",
            "",
        ]
    for chart in found:
        lines += _chart_table(chart)
    return lines


def _repetitions(run: RunResult) -> list[str]:
    lines = ["## Repetitions", ""]
    if not has_repetitions(run):
        return [*lines, SINGLE_RUN_STATEMENT, ""]
    if run.aggregate:
        lines += _table(aggregate_table(run))
    for name in repeated_names(run):
        lines += [f"### Per repetition: {name}", ""]
        lines += _table(repetition_table(run, name))
    return lines


def _shards(run: RunResult) -> list[str]:
    if not has_shards(run):
        return []
    lines = ["## Shards", ""]
    statement = shard_statement(run)
    if statement:
        lines += [statement, ""]
    if run.shards:
        lines += _table(shards_table(run))
    return lines


def _evaluation(evaluation: Evaluation) -> list[str]:
    lines = ["## Candidate evaluation", ""]
    refusal = evaluation_refusal(evaluation)
    if refusal:
        lines += [f"**{_escape(refusal)}**", ""]
    lines += _pairs(evaluation_identity(evaluation), ("item", "value"))
    for title, table in (
        ("Clauses over the evaluation's repetitions", evaluation_clause_table(evaluation)),
        ("Timing (untraced)", evaluation_timing_table(evaluation)),
        ("Diagnostics (traced, no threshold)", evaluation_diagnostics_table(evaluation)),
        ("What was frozen before the candidate ran", evaluation_frozen_files(evaluation)),
    ):
        if table is not None:
            lines += [f"### {title}", ""]
            lines += _table(table, code_columns={1})
    other = evaluation_other_rows(evaluation)
    if other:
        lines += ["Other recorded fields:", ""]
        lines += _pairs(other, ("field", "value"))
    return lines


def _campaign(record: CampaignRecord) -> list[str]:
    lines = ["## Agent campaign", "", f"**{_escape(campaign_headline(record))}**", ""]
    lines += [_escape(CAMPAIGN_EXIT_STATEMENT), ""]
    lines += _pairs(campaign_identity(record), ("item", "value"))
    for title, content in campaign_sections(record):
        lines += [f"### {title}", ""]
        if isinstance(content, Table):
            lines += _table(content)
        else:
            lines += [f"- {_escape(sentence)}" for sentence in content] + [""]
    return lines


def _scenario(run: RunResult, s: ScenarioResult) -> list[str]:
    label = scenario_label(s, run)
    lines = [
        f"## Scenario {label}",
        "",
        f"{_escape(s.description)}",
        "",
        f"Scenario file `{s.scenario_file}`, repetition {s.repetition}, lab wall time "
        f"{fmt_seconds(s.wall_s)}. Calibration: {calibration_statement(s.calibration)}.",
        "",
    ]
    if s.error:
        lines += [f"**The scenario did not complete: {_escape(s.error)}**", ""]
    lines += ["### Verdicts", ""]
    lines += _table(verdict_table(s))
    lines += ["### What the client claimed", "", records_note(s), ""]
    lines += _table(client_table(s))
    lines += ["### What the observers saw", ""]
    lines += _table(receiver_table(s))
    lines += _table(decoy_table(s))
    lines += _table(verifier_table(s), code_columns={1, 2, 3})
    for name in observer_names(s):
        if name == "verifier" or not observed_any(s, name):
            continue
        lines += _table(observer_summary_table(s, name))
        if name == "bpftrace":
            for index, block in probe_maps(s):
                lines += [
                    f"bpftrace final map values, invocation {index} (verbatim):",
                    "",
                    "```",
                    block,
                    "```",
                    "",
                ]
        if name == "perf":
            symbols = top_symbols_table(s)
            if symbols is not None:
                lines += ["CPU samples by symbol:", ""]
                lines += _table(symbols)
        if name == "packets":
            flows = flows_table(s)
            if flows is not None:
                lines += ["Packet flows:", ""]
                lines += _table(flows)
    unobserved = unobserved_table(s)
    if unobserved is not None:
        lines += ["Observers that did not observe this scenario:", ""]
        lines += _table(unobserved)
    lines += ["### Passes", ""]
    lines += _table(pass_table(s))
    overhead = overhead_table(s)
    if overhead is not None:
        lines += _table(overhead)
    lines += ["### Calibration findings", ""]
    lines += _table(findings_table(s))
    return lines


def _limits() -> list[str]:
    lines = ["## What this evidence cannot show", ""]
    lines += [f"- **{name}**: {why}" for name, why in OBSERVER_LIMITS.items()]
    lines += [f"- {why}" for why in GENERAL_LIMITS]
    lines += ["", f"**{EXIT_STATUS_STATEMENT}**", ""]
    return lines
