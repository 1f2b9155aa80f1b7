"""Client text is evidence, never markup: a run whose client printed HTML, Markdown,
reportlab and rich markup, a 300 KB reason, a huge completion line quoted by C6 and a C3
reason naming 20,000 destinations renders in every view, drawn as typed and bounded."""

from __future__ import annotations

import io
import re
import resource
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from lab.model import RunResult
from lab.reports.console import findings_table, print_summary
from lab.reports.markdown import render_markdown
from lab.reports.pdf import render_pdf
from lab.reports.text import (
    TEXT_LIMIT,
    bounded,
    console_text,
    html_text,
    md_cell,
    md_fence,
    md_text,
    pdf_text,
)
from tests.unit.reports.reports_sample import build_sample_run

MARKUP = (
    "<h1>forged</h1> <img src=http://198.51.100.7/x.png> <font color=red>x</font> "
    "<para>p</para> [bold]rich[/bold] **bold** `code` # heading\n| forged | row |\n"
    "## Forged heading\n<script>alert(1)</script> [link](http://198.51.100.7/) &amp;"
)
HUGE_REASON = (MARKUP + " ") * (300_000 // len(MARKUP))
DESTINATIONS = ", ".join(f"127.0.0.1:{port}" for port in range(20_000, 40_000))


def hostile_run() -> RunResult:
    run = build_sample_run()
    by_name = {s.name: s for s in run.scenarios}
    false_success = by_name["false-success"]
    false_success.verdicts["C1"].reason = HUGE_REASON
    line = '{"event": "complete", "status": "ok", "reason": "' + "y" * 200_000 + MARKUP + '"}'
    false_success.verdicts[
        "C6"
    ].reason = f"exit status 0 but the completion event disagrees: {line}"
    assert false_success.primary is not None
    claim = false_success.primary.invocations[0].claim
    claim.completion = {"event": "complete", "status": "ok", "reason": HUGE_REASON}
    egress = by_name["unexpected-egress"]
    egress.verdicts["C3"].reason = f"the client contacted {DESTINATIONS} (pass: strace)"
    egress.description = MARKUP
    return run


def test_bounded_names_the_rest_and_where_it_is() -> None:
    assert bounded("short") == "short"
    text = bounded("é" * 2_000, 1_000)
    assert text.startswith("é" * 1_000)
    assert text.endswith("… (2000 more bytes in results.json)")


def test_each_view_draws_markup_as_typed() -> None:
    assert md_text("<h1>x</h1>") == "&lt;h1&gt;x&lt;/h1&gt;"
    assert md_text("# heading") == "\\# heading"
    assert md_text("- item").startswith("\\-")
    assert md_text("1. item") == "1\\. item"
    assert md_cell("a|b\nc") == "a\\|b<br>c"
    assert md_cell("[x](http://h/) ![i](u) `c` *e*") == (
        "\\[x\\](http://h/) \\!\\[i\\](u) \\`c\\` \\*e\\*"
    )
    assert md_cell("source_bytes_read _emph_") == "source_bytes_read \\_emph\\_"
    assert md_fence("a ```` b") == "`````"
    assert pdf_text("<para>&</para>") == "&lt;para&gt;&amp;&lt;/para&gt;"
    assert html_text('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"
    assert console_text("[bold]x[/bold]") == "\\[bold]x\\[/bold]"


def test_markdown_forges_no_html_row_or_heading() -> None:
    md = render_markdown(hostile_run(), files=None)
    for raw in ("<h1>", "<img", "<font", "<para>", "<script"):
        assert raw not in md
    assert not re.search(r"(?<!\\)\]\(http", md), "no link or image can be forged"
    assert not [line for line in md.splitlines() if line.startswith("## Forged")]
    assert "| forged | row |" not in md
    # every table line has as many unescaped pipes as its header
    for block in re.findall(r"(?:^\|.*\n)+", md, flags=re.M):
        rows = block.splitlines()
        widths = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
        assert len(widths) == 1, rows[0]
    assert len(md) < 600_000, "a 300 KB reason is bounded, not copied"
    assert "more bytes in results.json)" in md


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_pdf_obeys_no_markup_and_cuts_tall_cells(tmp_path: Path) -> None:
    out = tmp_path / "report.pdf"
    render_pdf(hostile_run(), out, files=None)  # LayoutError before: a 65,940 pt cell
    assert _peak_rss_mib() < 1_000, "20,000 destinations do not cost gigabytes"
    try:
        text = subprocess.run(
            ["pdftotext", str(out), "-"], capture_output=True, text=True, check=True
        ).stdout
    except FileNotFoundError:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    assert "<para>p</para>" in text.replace("\n", " ") or "<para>" in text
    assert "[bold]rich[/bold]" in text
    assert "more bytes in results.json)" in text


def test_console_obeys_no_rich_markup() -> None:
    run = hostile_run()
    by_name = {s.name: s for s in run.scenarios}
    finding = by_name["false-success"].findings[0]
    finding.met = False
    finding.reason = "[bold red]forged[/] " * 1_000
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    print_summary(run, console)
    console.print(findings_table(run))
    out = buffer.getvalue()
    assert "[bold red]forged[/]" in out
    assert "more bytes in results.json" in out or len(out) < TEXT_LIMIT * 20
