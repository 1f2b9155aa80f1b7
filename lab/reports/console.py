"""Console presenter: the verdict table and the calibration matrix, drawn with rich.

It draws ``RunResult``; it computes nothing the model lacks.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from lab.model import CLAUSES, RunResult, Verdict

_STYLE = {"pass": "green", "fail": "red", "not-observed": "yellow"}


def _cell(v: Verdict | None) -> str:
    if v is None:
        return "-"
    style = _STYLE[v.observed]
    text = f"[{style}]{v.observed}[/]"
    if v.agrees is False:
        text += f" [bold red](expected {v.expected})[/]"
    return text


def verdict_table(run: RunResult) -> Table:
    table = Table(title="Verdicts (observed; expected shown only where they differ)")
    table.add_column("scenario")
    table.add_column("rep", justify="right")
    for clause in CLAUSES:
        table.add_column(clause)
    table.add_column("calibration", justify="right")
    for s in run.scenarios:
        cal = s.calibration
        cells = [_cell(s.verdicts.get(c)) for c in CLAUSES]
        score = f"{cal.met}/{cal.total}"
        if cal.not_met:
            score = f"[bold red]{score}[/]"
        if cal.not_observed:
            score += f" ({cal.not_observed} n/o)"
        table.add_row(s.name, str(s.repetition), *cells, score)
    return table


def findings_table(run: RunResult) -> Table:
    """The calibration matrix: every expectation that was not met or not observed."""
    table = Table(title="Calibration findings not met or not observed")
    for col in ("scenario", "observer", "inv", "key", "expected", "observed", "why"):
        table.add_column(col, overflow="fold")
    for s in run.scenarios:
        for f in s.findings:
            if f.met is True:
                continue
            status = "[red]NOT MET[/]" if f.met is False else "[yellow]not observed[/]"
            table.add_row(
                s.name,
                f.observer,
                "all" if f.invocation is None else str(f.invocation),
                f.key,
                str(f.expected),
                status if f.observed is None else f"{f.observed} {status}",
                f.reason or "",
            )
    return table


def print_summary(run: RunResult, console: Console) -> None:
    console.print(verdict_table(run))
    if any(f.met is not True for s in run.scenarios for f in s.findings):
        console.print(findings_table(run))
    cal = run.calibration
    console.print(
        f"Calibration: {cal.met} of {cal.total} expectations met, {cal.not_met} not met, "
        f"{cal.not_observed} not observed."
    )
    for name, status in sorted(run.observers.items()):
        if not status.available:
            console.print(f"[yellow]{name} unavailable:[/] {status.reason}")
    console.print(
        "The exit status says whether the instrument's observations matched the scenarios' "
        "expectations; it does [bold]not[/] say that every backup was correct."
    )
