"""The PDF report: reproducible bytes, every page rendered, no blank or near-empty page, the
verdict on page 1, every font embedded, the key text present, a bounded page count."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from lab.errors import ToolMissingError
from lab.model import RunResult
from lab.reports import ArchivedFile, fonts
from lab.reports.outline_scenario import telling_clauses
from lab.reports.pdf import render_pdf
from lab.reports.run import identity_rows
from tests.conftest import require

FILES = [ArchivedFile.of_bytes("results.json", b'{"schema_version": 1}')]


def test_same_input_gives_identical_bytes(sample_run: RunResult, tmp_path: Path) -> None:
    first, second = tmp_path / "a.pdf", tmp_path / "b.pdf"
    render_pdf(sample_run, first, files=FILES)
    render_pdf(sample_run, second, files=FILES)
    data = first.read_bytes()
    assert data.startswith(b"%PDF-")
    assert data == second.read_bytes()
    # the document date is the run's finish, not the rendering time
    assert b"D:20261129160742+00'00'" in data


def test_different_runs_differ(sample_run: RunResult, tmp_path: Path) -> None:
    render_pdf(sample_run, tmp_path / "a.pdf", files=FILES)
    # a reason the PDF prints: a clause that matters (telling_clauses)
    scenario = next(s for s in sample_run.scenarios if telling_clauses(s))
    scenario.verdicts[telling_clauses(scenario)[0]].reason = "changed"
    render_pdf(sample_run, tmp_path / "b.pdf", files=FILES)
    assert (tmp_path / "a.pdf").read_bytes() != (tmp_path / "b.pdf").read_bytes()


def _tool(name: str) -> str:
    path = shutil.which(name)
    require("pdftoppm", path is not None, f"{name} not installed (Debian package poppler-utils)")
    assert path is not None
    return path


def _pages(pdf: Path) -> int:
    out = subprocess.run(
        [_tool("pdfinfo"), str(pdf)], capture_output=True, text=True, check=True
    ).stdout
    return int(next(line.split()[1] for line in out.splitlines() if line.startswith("Pages:")))


def _page_text(pdf: Path, page: int) -> str:
    return subprocess.run(
        [_tool("pdftotext"), "-layout", "-f", str(page), "-l", str(page), str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _dark_pixels(png: Path) -> tuple[int, int]:
    """(pixels darker than near-white, all pixels) of an 8-bit grey or RGB PNG: a minimal
    decoder (IHDR, IDAT, the five row filters), so the test needs no imaging library."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 1
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (0, 2), f"unexpected PNG type {depth}/{colour}"
            bpp = 1 if colour == 0 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    dark = 0
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + a) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + b) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        dark += sum(1 for i in range(0, stride, bpp) if min(line[i : i + bpp]) < 200)
        prev = line
    return dark, width * height


def _body_lines(pdf: Path, page: int) -> list[str]:
    return [
        line
        for line in _page_text(pdf, page).splitlines()
        if line.strip() and "Execution Evidence Lab - run" not in line
    ]


def _archive(run: RunResult) -> list[ArchivedFile]:
    """The files a full run archives: every pass's records and every invocation's output."""
    files = list(FILES)
    for s in run.scenarios:
        unit = f"{s.name}/r{s.repetition}"
        files.append(ArchivedFile.of_bytes(f"{unit}/result.json", s.name.encode()))
        for p in s.passes:
            for name in ("receiver.jsonl", "decoy.jsonl"):
                files.append(ArchivedFile.of_bytes(f"{unit}/{p.collector}/{name}", b"{}"))
            for inv in p.invocations:
                for name in ("client.stdout", "client.stderr", f"{p.collector}.txt", "x.pcap"):
                    path = f"{unit}/{p.collector}/inv{inv.index}/{name}"
                    files.append(ArchivedFile.of_bytes(path, path.encode()))
    return files


def test_every_page_renders_and_none_is_blank(sample_run: RunResult, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    files = _archive(sample_run)
    assert len(files) > 150
    render_pdf(sample_run, pdf, files=files)
    pages = _pages(pdf)
    # a standard 8-scenario run with every observer reads in ten minutes (issues 15, 24;
    # tests/integration/test_full_run.py counts the pages of a real default run)
    assert 4 <= pages <= 12
    subprocess.run(
        [_tool("pdftoppm"), "-gray", "-png", "-r", "30", str(pdf), str(tmp_path / "page")],
        check=True,
        capture_output=True,
    )
    images = sorted(tmp_path.glob("page-*.png"))
    assert len(images) == pages
    for image in images:
        dark, total = _dark_pixels(image)
        assert dark > total * 0.002, f"{image.name} is blank"
    for page in range(1, pages + 1):
        body = _body_lines(pdf, page)
        # no page holds one row or two lines: only the last may be short
        assert len(body) >= (3 if page == pages else 25), f"page {page} is near-empty: {body}"


def test_page_one_is_the_verdict(sample_run: RunResult, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    render_pdf(sample_run, pdf, files=FILES)
    first = subprocess.run(
        [_tool("pdftotext"), "-l", "1", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    words = " ".join(first.split())
    cal = sample_run.calibration
    assert f"Calibration score: {cal.met} of {cal.total} expectations met" in words
    assert "Verdict matrix" in words
    for s in sample_run.scenarios:
        assert s.name in words
    for clause in ("C1", "C2", "C3", "C4", "C5", "C6"):
        assert clause in words
    assert "Signing key id 0EACA16E1E65E953" in words
    assert "The runner's exit status is not a statement that every backup was correct" in words
    # the identity is at the end, and page 1 says where
    assert "client binary SHA-256" not in words and "Identity of the run" in words


def test_identity_appendix_has_readable_rows(sample_run: RunResult, tmp_path: Path) -> None:
    sample_run.environment["image"] = {
        "name": "execution-evidence-lab:0.1.0",
        "digest": "sha256:" + "ab" * 32,
        "base": {"reference": "debian:bookworm-slim", "digest": "sha256:" + "cd" * 32},
    }
    rows = dict(identity_rows(sample_run))
    assert rows["container image: base reference"] == "debian:bookworm-slim"
    assert rows["container image: name"] == "execution-evidence-lab:0.1.0"
    assert rows["tool version: strace"] == "strace -- version 6.1"
    assert not any("{" in value for value in rows.values())
    pdf = tmp_path / "report.pdf"
    render_pdf(sample_run, pdf, files=FILES)
    words = " ".join(" ".join(_page_text(pdf, p).split()) for p in range(1, _pages(pdf) + 1))
    appendix = words[words.rindex("Identity of the run") :]
    assert "container image: base reference debian:bookworm-slim" in appendix
    assert '{"' not in appendix and "'name':" not in appendix


def test_every_font_is_embedded_and_the_document_says_its_language(
    sample_run: RunResult, tmp_path: Path
) -> None:
    pdf = tmp_path / "report.pdf"
    render_pdf(sample_run, pdf, files=FILES)
    listing = subprocess.run(
        [_tool("pdffonts"), str(pdf)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    header = listing[0].split()
    emb = header.index("emb")
    rows = [line.split() for line in listing[2:] if line.strip()]
    assert rows, "the PDF lists no font"
    for row in rows:
        # columns counted from the right: a font name never holds spaces, a type may
        assert row[emb - len(header)] == "yes", f"font not embedded: {' '.join(row)}"
    assert {row[0].split("+")[-1] for row in rows} <= set(fonts.FILES)
    info = subprocess.run(
        [_tool("pdfinfo"), str(pdf)], capture_output=True, text=True, check=True
    ).stdout
    title = next(line for line in info.splitlines() if line.startswith("Title:"))
    assert title.split(None, 1)[1] == "Execution Evidence Lab report: run 20261129T160000Z-ab12cd"
    assert b"/Lang (en)" in pdf.read_bytes()


def test_a_missing_font_names_its_package(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError, match="install the Debian package fonts-dejavu-core"):
        fonts.font_path(fonts.SANS, tmp_path)
    # the oblique faces are not in -core: the lab image once lacked them
    with pytest.raises(ToolMissingError, match="install the Debian package fonts-dejavu-extra"):
        fonts.font_path(fonts.ITALIC, tmp_path)


def test_no_doubled_full_stop(degraded_run: RunResult, tmp_path: Path) -> None:
    status = degraded_run.observers["packets"]
    status.available, status.reason = False, "tcpdump is not installed (Debian package tcpdump)."
    pdf = tmp_path / "report.pdf"
    render_pdf(degraded_run, pdf, files=None)
    words = " ".join(" ".join(_page_text(pdf, p).split()) for p in range(1, _pages(pdf) + 1))
    assert "(Debian package tcpdump)" in words
    assert "tcpdump).." not in words and ".;" not in words


def test_pdf_holds_the_key_content(sample_run: RunResult, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    render_pdf(sample_run, pdf, files=FILES)
    words = " ".join(" ".join(_page_text(pdf, p).split()) for p in range(1, _pages(pdf) + 1))
    cal = sample_run.calibration
    assert f"{cal.met} of {cal.total} expectations met" in words
    assert "The runner's exit status is not a statement that every backup was correct" in words
    # the raw tables' home
    assert "report.md and report.html, section 'Scenario hash-storm'" in words
    assert "Logical source bytes read per invocation (strace)" in words
    assert "CPU samples by symbol: busy-spin" in words
    assert "libcrypto.so.3, no symbols" in words
    assert "Tracing overhead: traced / untraced client wall time" in words
    assert FILES[0].sha256 in words
    assert "authenticity - who produced it - is not established" in words
    assert "reviewer-secret-hostname" not in words


def test_degraded_and_repeated_runs_render(
    degraded_run: RunResult, repeated_run: RunResult, tmp_path: Path
) -> None:
    render_pdf(degraded_run, tmp_path / "d.pdf", files=None)
    render_pdf(repeated_run, tmp_path / "r.pdf", files=None)
    degraded = " ".join(
        _page_text(tmp_path / "d.pdf", p) for p in range(1, _pages(tmp_path / "d.pdf") + 1)
    )
    assert "Logical source bytes read: not observed" in " ".join(degraded.split())
    assert "bpftrace needs CAP_BPF" in degraded
    repeated = " ".join(
        _page_text(tmp_path / "r.pdf", p) for p in range(1, _pages(tmp_path / "r.pdf") + 1)
    )
    assert "reliability 2/3" in repeated
    assert "MISMATCH" in repeated


RENDER = """
import sys
from pathlib import Path
from tests.unit.reports.reports_sample import build_sample_run
from lab.reports.pdf import render_pdf
render_pdf(build_sample_run(), Path(sys.argv[1]), files=None)
"""


def test_bytes_do_not_depend_on_the_environment(repo_root: Path, tmp_path: Path) -> None:
    """Another process, another hash seed, another SOURCE_DATE_EPOCH: the same bytes."""
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"{seed}.pdf"
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(repo_root),
            "PYTHONHASHSEED": seed,
            "SOURCE_DATE_EPOCH": str(1_000_000 * int(seed)),
            "TZ": "America/New_York" if seed == "1" else "Asia/Tokyo",
        }
        subprocess.run(
            [sys.executable, "-c", RENDER, str(out)],
            cwd=repo_root,
            env=env,
            check=True,
            capture_output=True,
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_no_word_is_broken_inside_a_cell() -> None:
    from reportlab.pdfbase.pdfmetrics import stringWidth

    from lab.reports import fonts
    from lab.reports.pdf_blocks import SEPARATORS, STYLES, _fitting

    fonts.register()
    for value, inner in (
        ("not-observed", 46.0),
        ("payload_bytes_consumed", 60.0),
        ("['127.0.0.1:37787'] and 127.0.0.1:40123/abc/def/ghi/jkl/mno/pqr/stu", 40.0),
    ):
        text, style = _fitting(value, "cell", inner)
        face = STYLES[style]
        for line in text.split("\n"):
            for word in line.split():
                assert stringWidth(word, face.fontName, face.fontSize) <= inner, (value, word)
        # a word wraps only after a separator, never inside a name
        for line in text.split("\n")[:-1]:
            assert line[-1] in SEPARATORS, (value, line)
        assert text.replace("\n", "") == value


def test_swimlanes_in_the_pdf(sample_run: RunResult, tmp_path: Path) -> None:
    from tests.unit.reports.test_reports_html import timeline

    pdf = tmp_path / "report.pdf"
    render_pdf(sample_run, pdf, files=FILES, timeline=timeline(sample_run))
    words = " ".join(" ".join(_page_text(pdf, p).split()) for p in range(1, _pages(pdf) + 1))
    for s in sample_run.scenarios:
        # one chart per scenario repetition (its most telling invocation), the rest in HTML
        assert f"Timeline of {s.name} r{s.repetition}, pass strace, invocation" in words
    assert "The other 1 invocations are drawn in report.html" in words
