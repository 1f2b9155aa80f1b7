"""The scenario, evaluation and campaign sections of the report's outline
(:mod:`lab.reports.outline` puts them in order).

    sections = scenario_sections(run, scenario, files)   # heading, verdicts, claims, ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lab.model import CLAUSES, RunResult, ScenarioResult, Verdict
from lab.reports import ArchivedFile, charts
from lab.reports.observers import (
    flows_table,
    observed_any,
    observer_names,
    observer_summary_table,
    probe_maps,
    top_symbols_table,
    unobserved_table,
)
from lab.reports.run import calibration_statement, scenario_label
from lab.reports.scenario import (
    agreement_word,
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
from lab.reports.table import NOT_RECORDED, Table, fmt, fmt_seconds, sentence
from lab.reports.view import (
    HTML,
    PDF,
    PDF_POINTS,
    RECORDS,
    Block,
    Bullets,
    Chart,
    RawFiles,
    Section,
    Swimlanes,
    TableBlock,
    Text,
    Verbatim,
    View,
    widths,
)

if TYPE_CHECKING:  # their presenters are imported where a record holds one (a run has none)
    from lab.model.campaign import CampaignRecord
    from lab.model.evaluation import Evaluation


def scenario_anchor(run: RunResult, s: ScenarioResult) -> str:
    label = f"scenario {scenario_label(s, run)}".lower()
    return "".join(ch if ch.isalnum() or ch == "-" else ("-" if ch == " " else "") for ch in label)


def scenario_sections(
    run: RunResult, s: ScenarioResult, files: list[ArchivedFile] | None
) -> list[Section]:
    """A scenario's sections: in the PDF one compact section (the verdict rows, the reasons
    of the clauses that matter, the CPU chart where the scenario's expectations concern CPU,
    the swimlane); in report.md and report.html every table besides."""
    label = scenario_label(s, run)
    head: list[Block] = [
        Text(s.description),
        Text(
            f"Scenario file {s.scenario_file}, repetition {s.repetition}, lab wall time "
            f"{fmt_seconds(s.wall_s)}. Calibration: {calibration_statement(s.calibration)}."
        ),
    ]
    if s.error:
        head.append(Text(sentence(f"The scenario did not complete: {s.error}"), "box"))
    head += digest_blocks(run, s, label)
    out = [
        Section(f"Scenario {label}", 0, head, anchor=scenario_anchor(run, s), keep=160),
        Section("Verdicts", 1, [TableBlock(verdict_table(s))], views=RECORDS),
        Section("What the client claimed", 1, client_blocks(s), views=RECORDS),
        Section("What the observers saw", 1, observer_blocks(s), views=RECORDS),
    ]
    passes: list[Block] = [TableBlock(pass_table(s))]
    overhead = overhead_table(s)
    if overhead is not None:
        passes.append(TableBlock(overhead))
    out.append(Section("Passes", 1, passes, views=RECORDS))
    out.append(Section("Calibration findings", 1, [TableBlock(findings_table(s))], views=RECORDS))
    out.append(Section("Timeline", 1, [Swimlanes(s.name, s.repetition)], views=HTML))
    prefix = f"{s.name}/r{s.repetition}/"
    raw = tuple(sorted(f.path for f in files or [] if f.path.startswith(prefix)))
    if raw:
        out.append(Section("Raw evidence", 1, [RawFiles(raw)], views=HTML))
    return out


#: clauses a correct client in an unfaulted scenario never exercises: their passes are what
#: the scenario is about (recovery needs an injected interruption, integrity a corrupt upload)
FAULT_CLAUSES = ("C4", "C5")


def telling_clauses(s: ScenarioResult) -> list[str]:
    """The clauses whose reasons the PDF prints: every verdict that is not a pass agreeing
    with its expectation (a fail, a not-observed, a disagreement), and the passes of the
    clauses only a fault exercises. Not-exercised clauses are named in the verdict rows."""
    out = []
    for clause in CLAUSES:
        v = s.verdicts.get(clause)
        if v is None or (v.observed == "not-exercised" and v.agrees is not False):
            continue
        plain = v.observed == "pass" and v.agrees is not False
        if not plain or clause in FAULT_CLAUSES:
            out.append(clause)
    return out


def verdict_rows(s: ScenarioResult) -> Table:
    """The scenario's verdicts as three rows under the clauses: observed, against the
    expectation, from which evidence."""
    verdicts = [s.verdicts.get(c) for c in CLAUSES]
    return Table(
        ["", *CLAUSES],
        [
            ["observed", *(NOT_RECORDED if v is None else v.observed for v in verdicts)],
            ["expected", *("-" if v is None else _expectation(v) for v in verdicts)],
            ["evidence", *("-" if v is None else fmt(v.evidence) for v in verdicts)],
        ],
    )


def _expectation(v: Verdict) -> str:
    if v.expected is None:
        return "no expectation"
    return "as expected" if v.agrees else f"{agreement_word(v)}: {v.expected}"


def digest_blocks(run: RunResult, s: ScenarioResult, label: str) -> list[Block]:
    """The PDF's scenario section after its heading and description."""
    clause_w = [(PDF_POINTS - 46) / len(CLAUSES)] * (len(CLAUSES) - 1)
    blocks: list[Block] = [TableBlock(verdict_rows(s), widths(46, *clause_w), views=PDF)]
    telling = telling_clauses(s)
    exercised = [c for c in CLAUSES if c not in telling and _exercised(s, c)]
    if telling:
        rows = [[c, s.verdicts[c].observed, s.verdicts[c].reason] for c in telling]
        table = Table(["clause", "observed", "why"], rows)
        blocks.append(TableBlock(table, widths(30, 52), views=PDF))
    missed = _not_met(findings_table(s, observed_only=True))
    if missed.rows:
        blocks.append(TableBlock(missed, widths(46, 40, 96, 70, 70, 42), views=PDF))
    passed = f"{', '.join(exercised)} passed as expected; " if exercised else ""
    blocks.append(
        Text(
            f"{passed}every reason, record and finding: report.md and report.html, section "
            f"'Scenario {label}'; raw output: {s.name}/r{s.repetition}/.",
            "note",
            views=PDF,
        )
    )
    chart = cpu_chart(run, s) if cpu_matters(s) else None
    if chart is not None:
        blocks.append(Chart(chart, caption=False, views=PDF))
    lanes = Swimlanes(s.name, s.repetition, views=PDF)
    return [*blocks, lanes]


def _exercised(s: ScenarioResult, clause: str) -> bool:
    v = s.verdicts.get(clause)
    return v is not None and v.observed == "pass"


def cpu_matters(s: ScenarioResult) -> bool:
    """A scenario's CPU samples matter when its expectations name perf's findings (a client
    that spins or re-hashes)."""
    return any(f.observer == "perf" for f in s.findings)


#: symbol rows of a CPU chart in the PDF (every row is in report.md and report.html)
CPU_CHART_ROWS = 6


def cpu_chart(run: RunResult, s: ScenarioResult) -> charts.BarChart | None:
    client = run.environment.get("client")
    named = client if isinstance(client, str) and client else None
    return charts.perf_symbols_chart(s, s.name, client=named, limit=CPU_CHART_ROWS)


def client_blocks(s: ScenarioResult) -> list[Block]:
    return [Text(records_note(s)), TableBlock(client_table(s))]


def observer_blocks(s: ScenarioResult) -> list[Block]:
    blocks: list[Block] = [
        TableBlock(receiver_table(s), views=RECORDS),
        TableBlock(decoy_table(s), views=RECORDS),
        TableBlock(verifier_table(s), code_columns=frozenset({1, 2, 3}), views=RECORDS),
    ]
    for name in observer_names(s):
        if name == "verifier" or not observed_any(s, name):
            continue
        blocks.append(TableBlock(observer_summary_table(s, name), views=RECORDS))
        if name == "bpftrace":
            for index, block in probe_maps(s):
                caption = f"bpftrace final map values, invocation {index} (verbatim):"
                blocks.append(Verbatim(caption, block, views=RECORDS))
        symbols = top_symbols_table(s) if name == "perf" else None
        if symbols is not None:
            blocks.append(TableBlock(symbols, caption="CPU samples by symbol:", views=RECORDS))
        flows = flows_table(s) if name == "packets" else None
        if flows is not None:
            blocks.append(TableBlock(flows, caption="Packet flows:", views=RECORDS))
    unobserved = unobserved_table(s)
    if unobserved is not None:
        caption = "Observers that did not observe this scenario:"
        blocks.append(TableBlock(unobserved, widths(60, 70), caption=caption, views=RECORDS))
    return blocks


def _not_met(table: Table) -> Table:
    """The PDF's findings: the expectations not met, the met ones counted in a note."""
    missed = [row for row in table.rows if row[5] == "NOT MET"]
    met = len(table.rows) - len(missed)
    notes = [f"{met} observed expectations met (every row is in report.md)."] if met else []
    return Table(table.header, missed, notes + table.notes)


def _pairs(rows: list[tuple[str, str]], header: tuple[str, str] = ("item", "value")) -> TableBlock:
    return TableBlock(Table(list(header), [[k, v] for k, v in rows]), widths(130))


def evaluation_sections(evaluation: Evaluation) -> list[Section]:
    from lab.reports.evaluation import (
        evaluation_clause_table,
        evaluation_diagnostics_table,
        evaluation_frozen_files,
        evaluation_identity,
        evaluation_other_rows,
        evaluation_refusal,
        evaluation_timing_table,
    )

    blocks: list[Block] = []
    refusal = evaluation_refusal(evaluation)
    if refusal:
        blocks.append(Text(refusal, "box"))
    blocks.append(_pairs(evaluation_identity(evaluation)))
    out = [Section("Candidate evaluation", 0, blocks, keep=200)]
    for title, table, cols in (
        (
            "Clauses over the evaluation's repetitions",
            evaluation_clause_table(evaluation),
            widths(35, 200, 120),
        ),
        ("Timing (untraced)", evaluation_timing_table(evaluation), widths(85, 95, 95, 45, 95)),
        (
            "Diagnostics (traced, no threshold)",
            evaluation_diagnostics_table(evaluation),
            widths(70, 35, 30, 75, 60, 60, 60),
        ),
        (
            "What was frozen before the candidate ran",
            evaluation_frozen_files(evaluation),
            None,
        ),
    ):
        if table is not None:
            block = TableBlock(table, cols, code_columns=frozenset({1}))
            out.append(Section(title, 1, [block]))
    other = evaluation_other_rows(evaluation)
    if other:
        out.append(Section("Other recorded fields", 1, [_pairs(other, ("field", "value"))]))
    return out


#: column widths of the campaign's repetitions table (rep, outcome, clauses, time, exit,
#: patch, digest, timing, why)
_REPETITION_WIDTHS = (24, 62, 50, 46, 34, 52, 70, 48)


def campaign_sections(record: CampaignRecord) -> list[Section]:
    from lab.reports.campaign import CAMPAIGN_EXIT_STATEMENT, campaign_headline
    from lab.reports.campaign import campaign_sections as campaign_parts
    from lab.reports.campaign import identity_rows as campaign_identity

    blocks: list[Block] = [
        Text(campaign_headline(record), "strong"),
        Text(CAMPAIGN_EXIT_STATEMENT, "box"),
        _pairs(campaign_identity(record)),
    ]
    out = [Section("Agent campaign", 0, blocks, keep=200)]
    for title, content in campaign_parts(record):
        if isinstance(content, Table):
            cols = widths(*_REPETITION_WIDTHS) if title == "Repetitions" else None
            out.append(Section(title, 1, [TableBlock(content, cols)]))
        else:
            out.append(Section(title, 1, [Bullets(tuple(content))]))
    return out


__all__ = ["View", "campaign_sections", "evaluation_sections", "scenario_sections"]
