"""One outline, walked by every view: the Markdown report's headings are the outline's
sections in the outline's order, and a block meant for one view is drawn only there."""

from __future__ import annotations

from lab.model import RunResult
from lab.reports.markdown import render_markdown
from lab.reports.outline import run_outline
from lab.reports.text import md_text


def test_markdown_headings_follow_the_outline(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=None)
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    sections = [
        "## " + md_text(s.title)
        for s in run_outline(sample_run, None)
        if s.level == 0 and "md" in s.views
    ]
    assert headings == sections
    assert headings[0] == "## Verdict"


def test_pdf_only_blocks_stay_out_of_markdown(sample_run: RunResult) -> None:
    md = render_markdown(sample_run, files=None)
    outline = run_outline(sample_run, None)
    pdf_only = [
        b.text
        for s in outline
        for b in s.blocks
        if b.views == frozenset({"pdf"}) and hasattr(b, "text")
    ]
    assert pdf_only, "the PDF has its own notes (where the records are)"
    for text in pdf_only:
        assert md_text(text) not in md
