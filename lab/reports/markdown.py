"""The Markdown report: GitHub-flavoured, deterministic, no host paths.

    from lab.reports.markdown import render_markdown
    (run_dir / "report.md").write_text(render_markdown(run, files=files), encoding="utf-8")

It walks the report's outline (:mod:`lab.reports.outline`), the one the PDF and HTML views
walk too, and only draws its blocks; where the PDF has a chart, this report has the chart's
figures as a table. Every string is drawn as typed (:mod:`lab.reports.text`).
"""

from __future__ import annotations

from lab.model import CLAUSE_TITLES, CLAUSES, RunResult
from lab.reports import ArchivedFile, charts
from lab.reports.outline import run_outline
from lab.reports.outline_scenario import scenario_anchor
from lab.reports.run import calibration_statement, matrix_cell, run_name, scenario_label
from lab.reports.table import NOT_OBSERVED, Table
from lab.reports.text import bounded, md_cell, md_fence, md_text
from lab.reports.view import (
    Block,
    Bullets,
    Chart,
    Matrix,
    RawFiles,
    Section,
    TableBlock,
    Text,
    Verbatim,
)

#: a verbatim block (tool output) is cut after this many characters; the whole is in the
#: archive's raw files
VERBATIM_LIMIT = 20_000


def render_markdown(
    run: RunResult, *, files: list[ArchivedFile] | None, outline: list[Section] | None = None
) -> str:
    out = [f"# Execution Evidence Lab report: {md_text(run_name(run.run_id))}", ""]
    for section in run_outline(run, files) if outline is None else outline:
        if "md" not in section.views:
            continue
        blocks = [b for b in section.blocks if "md" in b.views]
        if not blocks and section.level > 0:
            continue
        out += ["#" * (section.level + 2) + " " + md_text(section.title), ""]
        for block in blocks:
            out += _block(block)
    return "\n".join(out).rstrip("\n") + "\n"


def _block(block: Block) -> list[str]:
    if isinstance(block, Text):
        text = md_text(block.text)
        if block.style == "box":
            return [f"> **{text}**", ""]
        if block.style == "strong":
            return [f"**{text}**", ""]
        return [f"_{text}_" if block.style == "note" else text, ""]
    if isinstance(block, Bullets):
        return [f"- {md_cell(item)}" for item in block.items] + [""]
    if isinstance(block, TableBlock):
        caption = [md_text(block.caption), ""] if block.caption else []
        return caption + _table(block.table, code_columns=set(block.code_columns))
    if isinstance(block, Verbatim):
        shown = bounded(block.text, VERBATIM_LIMIT)
        return [md_text(block.caption), "", md_fence(shown), shown, md_fence(shown), ""]
    if isinstance(block, Chart):
        return _chart_table(block.chart)
    if isinstance(block, Matrix):
        return _matrix(block.run)
    if isinstance(block, RawFiles):
        return [f"- `{path}`" for path in block.paths] + [""]
    raise TypeError(f"no Markdown drawing for {type(block).__name__}")


def _code(value: str) -> str:
    """Inline code for a plain path or digest (a code span would show an escape's
    backslash)."""
    plain = value and all(ch.isalnum() or ch in "/.-_:" for ch in value)
    return f"`{value}`" if plain else md_cell(value)


def _table(table: Table, *, code_columns: set[int] | None = None) -> list[str]:
    code_columns = code_columns or set()
    lines = []
    if table.rows:
        lines.append("| " + " | ".join(md_cell(h) for h in table.header) + " |")
        lines.append("|" + "|".join(" --- " for _ in table.header) + "|")
        for row in table.rows:
            cells = [
                _code(c) if i in code_columns and _looks_like_digest(c) else md_cell(c)
                for i, c in enumerate(row)
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    for note in table.notes:
        lines += [f"_{md_text(note)}_", ""]
    return lines


def _looks_like_digest(value: str) -> bool:
    return len(value) >= 40 and all(c in "0123456789abcdef:sha" for c in value)


def _chart_table(chart: charts.BarChart) -> list[str]:
    header = ["scenario" if chart.categories else "", *(s.name for s in chart.series)]
    rows = [
        [cat, *(NOT_OBSERVED if v is None else charts.value_text(v, chart.unit) for v in vals)]
        for cat, vals in zip(chart.categories, chart.values, strict=True)
    ]
    lines = [f"### {md_text(chart.title)}", ""]
    lines += _table(Table(header, rows, [chart.caption, *chart.notes]))
    return lines


def _matrix(run: RunResult) -> list[str]:
    lines = [
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
        cells = [
            md_cell(matrix_cell(s.verdicts.get(c))).replace("MISMATCH", "**MISMATCH**")
            for c in CLAUSES
        ]
        cal = s.calibration
        lines.append(
            f"| [{md_cell(scenario_label(s, run))}](#{scenario_anchor(run, s)}) | "
            + " | ".join(cells)
            + f" | {cal.met}/{cal.total} met, {cal.not_met} not met, "
            f"{cal.not_observed} not observed |"
        )
    lines += ["", "Clauses:", ""]
    lines += [f"- **{c}** {md_cell(CLAUSE_TITLES[c])}" for c in CLAUSES]
    lines += ["", f"**Calibration score: {md_text(calibration_statement(run.calibration))}.**", ""]
    return lines
