"""``Para``: each (text, style) parsed once and each paragraph wrapped once per width, to
the same bytes as reportlab's own Paragraph; a parsed text shared by two paragraphs is
never one object they both change."""

from __future__ import annotations

from pathlib import Path

import pytest
from reportlab.platypus import Paragraph

from lab.model import RunResult
from lab.reports import ArchivedFile, pdf_blocks
from lab.reports.pdf import render_pdf
from lab.reports.pdf_blocks import STYLES, Para

FILES = [ArchivedFile.of_bytes(f"scenario-{i}/records.jsonl", b"x" * i) for i in range(60)]


@pytest.mark.parametrize("fixture", ["sample_run", "degraded_run", "repeated_run"])
def test_the_same_bytes_as_reportlabs_own_paragraph(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run: RunResult = request.getfixturevalue(fixture)
    pdf_blocks._PARSED.clear()
    render_pdf(run, tmp_path / "cold.pdf", files=FILES)  # every text parsed here
    render_pdf(run, tmp_path / "warm.pdf", files=FILES)  # every text from the cache
    with monkeypatch.context() as patch:
        patch.setattr(Para, "_setup", Paragraph._setup)
        patch.setattr(Para, "wrap", Paragraph.wrap)
        render_pdf(run, tmp_path / "plain.pdf", files=FILES)
    plain = (tmp_path / "plain.pdf").read_bytes()
    assert (tmp_path / "cold.pdf").read_bytes() == plain
    assert (tmp_path / "warm.pdf").read_bytes() == plain


def test_a_cached_text_is_each_paragraphs_own_copy() -> None:
    pdf_blocks._PARSED.clear()
    first = Para("<b>bold</b> and plain", STYLES["cell"])
    second = Para("<b>bold</b> and plain", STYLES["cell"])
    assert len(pdf_blocks._PARSED) == 1
    assert first.frags is not second.frags
    assert all(a is not b for a, b in zip(first.frags, second.frags, strict=True))
    first.frags[0].text = "changed"
    assert second.frags[0].text == "bold"
    assert Para("<b>bold</b> and plain", STYLES["cell"]).frags[0].text == "bold"
    # the same text in another style is parsed for that style
    assert Para("<b>bold</b> and plain", STYLES["body"]).frags[0].fontSize == 8.5


def test_a_wrap_is_computed_again_for_another_width() -> None:
    text = "word " * 60
    cached, plain = Para(text, STYLES["cell"]), Paragraph(text, STYLES["cell"])
    for width in (300.0, 120.0, 300.0, 80.0):
        assert cached.wrap(width, 1e9) == plain.wrap(width, 1e9)
        assert len(cached.blPara.lines) == len(plain.blPara.lines)


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_blocks, "PARSED_LIMIT", 3)
    pdf_blocks._PARSED.clear()
    for i in range(10):
        Para(f"text {i}", STYLES["cell"])
        assert len(pdf_blocks._PARSED) <= 3
    assert Para("text 9", STYLES["cell"]).frags[0].text == "text 9"
