"""The PDF report's building blocks: page geometry, colours, paragraph styles, and the
flowables every section is made of (wrapped paragraphs, tables whose header repeats on every
page, verbatim boxes, label/value pairs), and the document itself (outline entries, footer,
the date pinned to the run's finish so that the same run gives the same bytes).

    flow = [heading("Observers", 0), para("Collectors used: ...", "body")]
    flow += table_flow(observer_table(run), [55, 65, 150, WIDTH - 270])
    flow += pairs(identity_rows(run))

Every font is DejaVu, embedded (:mod:`lab.reports.fonts`), and every table cell is a wrapped
paragraph so that no text runs off the page.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from reportlab.lib import colors
from reportlab.lib.enums import TA_LEFT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    Flowable,
    Paragraph,
    Preformatted,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from lab.reports.fonts import BOLD, ITALIC, MONO, SANS
from lab.reports.table import Table as ReportTable
from lab.reports.text import RAW_FILE, TEXT_LIMIT, bounded, pdf_text

#: a verbatim box shows at most this many lines of this many characters
VERBATIM_LINES = 50
VERBATIM_WIDTH = 100

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
    "title": ParagraphStyle("title", fontName=BOLD, fontSize=16, leading=20, spaceAfter=6),
    "h1": ParagraphStyle(
        "h1",
        fontName=BOLD,
        fontSize=13,
        leading=16,
        spaceBefore=8,
        spaceAfter=5,
        keepWithNext=1,
    ),
    "h2": ParagraphStyle(
        "h2",
        fontName=BOLD,
        fontSize=10,
        leading=13,
        spaceBefore=7,
        spaceAfter=3,
        keepWithNext=1,
    ),
    "body": ParagraphStyle(
        "body", fontName=SANS, fontSize=8.5, leading=11, spaceAfter=4, alignment=TA_LEFT
    ),
    "strong": ParagraphStyle("strong", fontName=BOLD, fontSize=9, leading=12, spaceAfter=4),
    "note": ParagraphStyle(
        "note",
        fontName=ITALIC,
        fontSize=7.5,
        leading=9.5,
        spaceAfter=4,
        textColor=colors.HexColor("#333333"),
    ),
    "cell": ParagraphStyle("cell", fontName=SANS, fontSize=7, leading=8.6),
    "strongcell": ParagraphStyle(
        "strongcell", fontName=BOLD, fontSize=7, leading=8.6, textColor=colors.HexColor("#B00020")
    ),
    "cellhead": ParagraphStyle("cellhead", fontName=BOLD, fontSize=7, leading=8.6),
    "mono": ParagraphStyle("mono", fontName=MONO, fontSize=6.4, leading=8.2),
    "pre": ParagraphStyle("pre", fontName=MONO, fontSize=8, leading=10),
    "box": ParagraphStyle(
        "box",
        fontName=BOLD,
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

#: a table's own text face (reportlab's default is Helvetica, which it lists unembedded even
#: when every cell is a paragraph)
CELL_FONT = ("FONTNAME", (0, 0), (-1, -1), SANS)

for _style in STYLES.values():
    # reportlab's default bullet face is Helvetica, which it would list unembedded
    _style.bulletFontName = SANS


#: how many parsed (text, style) pairs :class:`Para` keeps (a default run's report holds about
#: 300; a 1,000-scenario run's tens of thousands): past it the cache starts again empty
PARSED_LIMIT = 50_000
_PARSED: dict[tuple[str, ParagraphStyle], tuple[ParagraphStyle, list[Any]]] = {}


class Para(Paragraph):  # type: ignore[misc]
    """reportlab's Paragraph, with what it computes again and again computed once.

    reportlab parses each paragraph's markup with an HTML parser, and a table wraps every
    cell at least twice (to measure its row, then to draw it; a header repeated on every
    page, once per page). A default run's report has 655 paragraphs holding about 300
    different texts; parsing each (text, style) once (each paragraph gets its own copy of
    the parsed fragments, so that nothing one paragraph does reaches another) and wrapping
    each paragraph once per width draws it in about 20 % less time, to the same bytes
    (tests/unit/reports/test_pdf_paragraphs.py draws a report both ways)."""

    style: Any
    frags: list[Any]
    bulletText: Any
    text: str
    debug: int

    def _setup(self, text: str, style: Any, bulletText: Any, frags: Any, cleaner: Any) -> None:
        if frags is not None or bulletText is not None:
            super()._setup(text, style, bulletText, frags, cleaner)
            return
        key = (text, style)
        parsed = _PARSED.get(key)
        if parsed is None:
            super()._setup(text, style, bulletText, frags, cleaner)
            if self.bulletText is not None:
                return  # a <bullet> in the text: nothing here uses one, and it is not kept
            if len(_PARSED) >= PARSED_LIMIT:
                _PARSED.clear()
            _PARSED[key] = (self.style, [f.clone() for f in self.frags])
            return
        self.style = parsed[0]
        self.frags = [f.clone() for f in parsed[1]]
        self.text = cleaner(text)
        self.bulletText = None
        self.debug = 0

    def wrap(self, availWidth: float, availHeight: float) -> tuple[float, float]:
        # reportlab's own wrap depends on the width, the style and the fragments alone
        memo = self.__dict__.get("_wrapped")
        if memo is not None and memo[0] == availWidth and memo[1] is self.frags:
            _, _, self._wrapWidths, self.blPara, self.width, self.height = memo
            return self.width, self.height
        width, height = super().wrap(availWidth, availHeight)
        self._wrapped = (availWidth, self.frags, self._wrapWidths, self.blPara, width, height)
        return width, height


def para(value: str, style: str = "cell") -> Paragraph:
    """``value`` drawn as typed (never obeyed as reportlab markup), bounded in length."""
    return Para(pdf_text(value), STYLES[style])


def heading(value: str, level: int, *, keep_with_next: bool = True) -> Paragraph:
    """A section's heading; ``keep_with_next=False`` where the caller already made room
    for it (a conditional page break), so that a long table after it may start on the same
    page instead of moving whole to the next one."""
    style = STYLES["h1" if level == 0 else "h2"]
    if not keep_with_next:
        style = ParagraphStyle(f"{style.name}-free", parent=style, keepWithNext=0)
    para = Para(pdf_text(value, 200), style)
    para._outline_level = level
    return para


#: No table cell is taller than this: a page's frame is about 780 pt, and reportlab raises
#: LayoutError (no report, no archive) on a row that cannot fit on one.
CELL_MAX_HEIGHT = 360.0


#: the smallest face a cell shrinks to so that its longest word fits whole
MIN_CELL_SIZE = 5.0
#: where an identifier too long for its cell may wrap (never inside a word)
SEPARATORS = "/.:_,;=-"


def _fitting(value: str, style: str, inner: float) -> tuple[str, str]:
    """``value`` and a style under which no word of it is broken: the cell's own face when
    its longest word fits, else a smaller one (down to ``MIN_CELL_SIZE``), else the word
    wrapped at separators (``/``, ``.``, ``:``, ``_`` …) onto lines of their own."""
    base = STYLES[style]
    words = value.split()
    if not words:
        return value, style
    longest = max(words, key=lambda w: stringWidth(w, base.fontName, base.fontSize))
    size = base.fontSize
    while stringWidth(longest, base.fontName, size) > inner and size > MIN_CELL_SIZE:
        size -= 0.5
    if size != base.fontSize:
        name = f"{style}@{size}"
        if name not in STYLES:
            STYLES[name] = ParagraphStyle(name, parent=base, fontSize=size, leading=size * 1.23)
        style = name
    if stringWidth(longest, base.fontName, size) <= inner:
        return value, style
    return " ".join(_wrap_word(w, base.fontName, size, inner) for w in words), style


def _wrap_word(word: str, font: str, size: float, inner: float) -> str:
    if stringWidth(word, font, size) <= inner:
        return word
    lines, line = [], ""
    for piece in _pieces(word):
        if line and stringWidth(line + piece, font, size) > inner:
            lines.append(line)
            line = ""
        line += piece
    return "\n".join([*lines, line])


def _pieces(word: str) -> list[str]:
    """``word`` cut after each separator: "a/b.c" -> ["a/", "b.", "c"]."""
    out, piece = [], ""
    for ch in word:
        piece += ch
        if ch in SEPARATORS:
            out.append(piece)
            piece = ""
    return [*out, piece] if piece else out


def cell_para(value: str, style: str, width: float) -> Paragraph:
    """A table cell of ``width`` points, no word broken inside it (:func:`_fitting`), cut
    (with the marker saying how much is left out and where it is kept) to at most
    ``CELL_MAX_HEIGHT`` points, whatever a client printed."""
    value, style = _fitting(bounded(value), style, max(width - 6, 10))
    cell = para(value, style)
    if len(value) < 200 and value.count("\n") < 20:
        return cell  # too short to approach the limit: no measuring
    inner = max(width - 6, 10)  # the grid's left and right padding
    if cell.wrap(inner, 1e9)[1] <= CELL_MAX_HEIGHT:
        return cell
    low, high = 0, min(len(value), TEXT_LIMIT)
    while low < high:  # the longest prefix that fits
        mid = (low + high + 1) // 2
        if para(bounded(value, mid), style).wrap(inner, 1e9)[1] <= CELL_MAX_HEIGHT:
            low = mid
        else:
            high = mid - 1
    return para(bounded(value, low), style)


def _is_digest(value: str) -> bool:
    return len(value) >= 40 and all(c in "0123456789abcdef:sha" for c in value)


def grid(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    widths: Sequence[float],
    extra: Sequence[tuple[Any, ...]] = (),
    first_column_bold: bool = False,
    colour_outcomes: bool = False,
) -> Table:
    """A table of wrapped paragraphs whose header repeats on every page it spans; a cell
    holding exactly an outcome word gets that outcome's colour."""
    data: list[list[Flowable]] = [
        [cell_para(h, "cellhead", w) for h, w in zip(header, widths, strict=False)]
    ]
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
            cells.append(cell_para(value, style, widths[i]))
        data.append(cells)
    table = Table(data, colWidths=list(widths), repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                CELL_FONT,
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


def table_flow(
    table: ReportTable, widths: Sequence[float] | None = None, *, colour_outcomes: bool = False
) -> list[Flowable]:
    flow: list[Flowable] = []
    if table.rows:
        flow.append(
            grid(
                table.header,
                table.rows,
                widths or even_widths(table.header),
                first_column_bold=True,
                colour_outcomes=colour_outcomes,
            )
        )
        flow.append(Spacer(1, 8))
    flow += [para(note, "note") for note in table.notes]
    return flow


def verbatim(block: str) -> Table:
    """Raw probe output, verbatim, in a shaded box (Preformatted alone draws no background);
    at most ``VERBATIM_LINES`` lines of it, each cut at ``VERBATIM_WIDTH`` characters."""
    lines = block.splitlines()
    shown = [bounded(line, VERBATIM_WIDTH) for line in lines[:VERBATIM_LINES]]
    if len(lines) > VERBATIM_LINES:
        rest = len("\n".join(lines[VERBATIM_LINES:]).encode("utf-8", "replace"))
        shown.append(f"… ({rest} more bytes in {RAW_FILE})")
    box = Table([[Preformatted("\n".join(shown), STYLES["pre"])]], colWidths=[WIDTH * 0.6])
    box.setStyle(
        TableStyle(
            [
                CELL_FONT,
                ("BACKGROUND", (0, 0), (-1, -1), colors.HexColor("#F2F2F2")),
                ("BOX", (0, 0), (-1, -1), 0.4, GRID),
                ("LEFTPADDING", (0, 0), (-1, -1), 6),
            ]
        )
    )
    box.hAlign = "LEFT"
    return box


def even_widths(header: Sequence[str], first: float = 120.0) -> list[float]:
    """A wide first (label) column, the rest shared equally."""
    if len(header) == 1:
        return [WIDTH]
    first = min(first, WIDTH / len(header) * 1.6)
    rest = (WIDTH - first) / (len(header) - 1)
    return [first] + [rest] * (len(header) - 1)


def pairs(rows: Sequence[tuple[str, str]], label: float = 130.0) -> list[Flowable]:
    return [
        grid(
            ["item", "value"],
            [list(r) for r in rows],
            [label, WIDTH - label],
            first_column_bold=True,
        ),
        Spacer(1, 6),
    ]


class Document(SimpleDocTemplate):  # type: ignore[misc]
    """Adds a PDF outline entry for every section heading (deterministic keys)."""

    def afterFlowable(self, flowable: Flowable) -> None:
        level = getattr(flowable, "_outline_level", None)
        if level is None:
            return
        key = f"section-{self.seq.nextf('outline')}"
        self.canv.bookmarkPage(key)
        self.canv.addOutlineEntry(flowable.getPlainText(), key, level=level, closed=level > 0)


def epoch_of(stamp: str) -> int | None:
    """RFC 3339 ``finished_at`` as seconds since the epoch, or None if it does not parse."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp())


@contextmanager
def document_date(epoch: int | None) -> Iterator[None]:
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


def footer(name: str) -> Callable[[Canvas, Any], None]:
    def draw(canvas: Canvas, doc: Any) -> None:
        canvas.saveState()
        canvas.setFont(SANS, 7)
        canvas.setFillColor(colors.HexColor("#555555"))
        canvas.drawString(MARGIN, MARGIN - 2, f"Execution Evidence Lab - {name}")
        canvas.drawRightString(PAGE[0] - MARGIN, MARGIN - 2, f"page {doc.page}")
        canvas.restoreState()

    return draw
