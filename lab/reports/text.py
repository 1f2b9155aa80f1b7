"""Text a client, an agent or an archive supplied is evidence, never markup: each view's
escaping, and one length bound for all of them.

    bounded("x" * 300_000)      # "xxx… (298,800 more bytes in results.json)"
    md_text("<h1>|#")           # "&lt;h1&gt;\\|\\#": GitHub renders it as typed
    md_cell("a|b\\nc")          # one table cell: no row or column can be forged
    pdf_text("<para>")          # "&lt;para&gt;": reportlab draws it, never obeys it
    html_text("<img src=x>")    # html.escape
    console_text("[bold]x")     # rich.markup.escape

Every presenter passes each string it did not write itself through its view's function, so
a claim, a reason, a destination or a path is drawn as typed. The bound keeps a report
readable and its renderer's memory small whatever a client prints: the whole text stays in
the raw files (``results.json`` holds every reason and claim the reports quote; the client's
own output is in the run directory beside it), and the cut says how much is there.
"""

from __future__ import annotations

import html
import re

#: At most this many characters of one cell or sentence are drawn; a reason naming every
#: destination of an ordinary run fits (a few hundred characters), a flood does not.
TEXT_LIMIT = 1_200

#: Where the whole of a bounded text is kept (the model's own file; every report string a
#: client can influence comes from it).
RAW_FILE = "results.json"


def bounded(value: str, limit: int = TEXT_LIMIT, *, raw: str = RAW_FILE) -> str:
    """``value`` cut to ``limit`` characters, the cut saying how many bytes it left out and
    where they are kept."""
    if len(value) <= limit:
        return value
    rest = len(value[limit:].encode("utf-8", "replace"))
    return f"{value[:limit]}… ({rest} more bytes in {raw})"


#: ASCII punctuation that opens Markdown syntax anywhere in a GitHub-flavoured line
#: (emphasis, code, links, images, tables, strike-through); ``<``, ``>`` and ``&``
#: become entities instead. A heading or a list item can only start a line: see below.
_MD_SPECIAL = frozenset("\\`*_[]!|~")


def md_text(value: str, limit: int = TEXT_LIMIT) -> str:
    """One line of Markdown drawing ``value`` as typed: HTML as entities, every Markdown
    punctuation backslash-escaped, line breaks as ``<br>``."""
    text = md_cell(value, limit)
    # a line starting "#", "- ", "+ " or "1. " would open a heading or a list
    if text[:1] in ("#", "-", "+"):
        return "\\" + text
    number = re.match(r"[0-9]+(?=[.)])", text)
    return text if number is None else f"{number.group()}\\{text[number.end() :]}"


def md_cell(value: str, limit: int = TEXT_LIMIT) -> str:
    """A GFM table cell drawing ``value`` as typed (inside a table no line opens a heading
    or a list; a ``|`` is escaped so no column can be forged)."""
    out: list[str] = []
    text = bounded(value, limit)
    for i, ch in enumerate(text):
        if ch == "_" and _intraword(text, i):
            out.append(ch)  # GFM: "_" between two letters never opens or closes emphasis
        elif ch == "<":
            out.append("&lt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch == ">":
            out.append("&gt;")
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        elif ch == "\r":
            continue
        elif ch == "\n":
            out.append("<br>")
        else:
            out.append(ch)
    return "".join(out)


def _intraword(text: str, i: int) -> bool:
    return 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()


def md_fence(block: str) -> str:
    """A fence longer than any run of backticks in ``block``, so it cannot be closed early."""
    longest = run = 0
    for ch in block:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def pdf_text(value: str, limit: int = TEXT_LIMIT) -> str:
    """reportlab Paragraph text: ``&``, ``<``, ``>`` as entities (no ``<para>``, ``<font>``
    or ``<img>`` obeyed), line breaks as ``<br/>``."""
    return html.escape(bounded(value, limit), quote=False).replace("\n", "<br/>")


def html_text(value: str, limit: int = TEXT_LIMIT) -> str:
    """HTML element or attribute text."""
    return html.escape(bounded(value, limit), quote=True)


def console_text(value: str, limit: int = TEXT_LIMIT) -> str:
    """rich console text: ``[bold]`` and the like drawn, never obeyed."""
    from rich.markup import escape as rich_escape  # the console's own: not the PDF drawer's

    return str(rich_escape(bounded(value, limit)))
