"""The vocabulary of the report's outline (:mod:`lab.reports.outline`): sections made of
blocks, each block saying in which views (``md``, ``pdf``, ``html``) it is drawn.

    Section("Observers", 0, [Text("Collectors used: ..."), TableBlock(observer_table(run))])
    TableBlock(table, widths(55, 65, 150), views=RECORDS)   # report.md and report.html only

A presenter draws each kind of block; none of them holds a figure the model lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lab.model import RunResult
from lab.reports import charts
from lab.reports.table import Table

View = Literal["md", "pdf", "html"]
ALL: frozenset[View] = frozenset(("md", "pdf", "html"))
RECORDS: frozenset[View] = frozenset(("md", "html"))
PDF: frozenset[View] = frozenset(("pdf",))
HTML: frozenset[View] = frozenset(("html",))
#: the PDF's text width in points (A4 less two 16 mm margins): column widths are fractions
PDF_POINTS = 595.2756 - 2 * 16 * 72 / 25.4


def widths(*points: float) -> tuple[float, ...]:
    """PDF column widths given in points, the last column taking the rest, as fractions."""
    rest = PDF_POINTS - sum(points)
    return tuple(p / PDF_POINTS for p in (*points, rest))


@dataclass(frozen=True)
class Text:
    text: str
    #: body, strong (a headline), note (small print), box (a framed statement)
    style: Literal["body", "strong", "note", "box"] = "body"
    views: frozenset[View] = ALL


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]
    views: frozenset[View] = ALL


@dataclass(frozen=True)
class TableBlock:
    table: Table
    #: fractions of the text width (the PDF); None: a wide first column, the rest even
    widths: tuple[float, ...] | None = None
    #: columns whose digests are drawn as code
    code_columns: frozenset[int] = frozenset()
    #: a caption drawn above the table
    caption: str | None = None
    views: frozenset[View] = ALL


@dataclass(frozen=True)
class Verbatim:
    caption: str
    text: str
    views: frozenset[View] = ALL


@dataclass(frozen=True)
class Chart:
    chart: charts.BarChart
    #: the PDF draws one caption for a series of charts
    caption: bool = True
    views: frozenset[View] = ALL


@dataclass(frozen=True)
class Matrix:
    """The verdict matrix: scenarios by clauses (each view draws its cells from the run)."""

    run: RunResult
    views: frozenset[View] = ALL


@dataclass(frozen=True)
class RawFiles:
    """The archived files of one scenario (its raw evidence), linked where a view can."""

    paths: tuple[str, ...]
    views: frozenset[View] = frozenset(("html",))


@dataclass(frozen=True)
class Swimlanes:
    """One scenario repetition's invocations on the run's one clock, drawn from the
    timeline rows the presenter was given (:mod:`lab.reports.swimlanes`)."""

    scenario: str
    repetition: int
    views: frozenset[View] = frozenset(("html", "pdf"))


Block = Text | Bullets | TableBlock | Verbatim | Chart | Matrix | RawFiles | Swimlanes


@dataclass
class Section:
    title: str
    #: 0 a section, 1 a subsection
    level: int
    blocks: list[Block] = field(default_factory=list)
    #: the id the matrix links to (scenarios)
    anchor: str | None = None
    views: frozenset[View] = ALL
    #: the PDF starts this section on a new page unless this many points are left
    keep: float = 0.0
