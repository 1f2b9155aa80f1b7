"""report.html: self-contained, the verdict first, every link pointing somewhere, client text
escaped, swimlanes drawn from timeline rows on the one clock, and rendered by a real browser
(headless Chromium from Debian; capability ``chromium``)."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from lab.model import RunResult
from lab.reports import ArchivedFile
from lab.reports.html import render_html
from lab.reports.swimlanes import MARKS_PER_LANE, swimlanes
from tests.conftest import require
from tests.unit.reports.test_reports_hostile import hostile_run

#: the causal order of one invocation, 3 ms apart (a fallback for tests: rows in the
#: timeline.jsonl format of issue 24, t_ns on the run's one clock)
ORDER = (
    ("runner", "client-start"),
    ("client", "start"),
    ("strace", "connect"),
    ("packets", "syn"),
    ("receiver", "accept"),
    ("client", "complete"),
    ("verifier", "check"),
)


def timeline(run: RunResult) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for s in run.scenarios:
        for inv in (1, 2):
            for i, (source, event) in enumerate(ORDER):
                rows.append(
                    {
                        "t_ns": inv * 10**9 + i * 3_000_000,
                        "source": source,
                        "event": event,
                        "scenario": s.name,
                        "repetition": s.repetition,
                        "pass": "strace",
                        "invocation": inv,
                    }
                )
    rows.append({"source": "runner", "event": "no t_ns: before the one clock"})
    return rows


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.tags: list[str] = []
        self.sources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name == "href" and value is not None:
                self.hrefs.append(value)
            if name == "src" and value is not None:
                self.sources.append(value)


def _run_dir(run: RunResult, root: Path) -> list[ArchivedFile]:
    """A run directory holding a raw file per scenario, as the archive would."""
    files = []
    for s in run.scenarios:
        rel = f"{s.name}/r{s.repetition}/strace/inv1/strace.txt"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("connect(3, ...) = 0\n")
        files.append(ArchivedFile.of_bytes(rel, b"connect(3, ...) = 0\n"))
    return files


def broken_links(html: str, run_dir: Path) -> list[str]:
    """Every href that points nowhere: an #id missing from the page, or a relative file
    missing from the run directory; and every link that leaves the file."""
    parser = _Links()
    parser.feed(html)
    broken = []
    for href in parser.hrefs:
        if href.startswith("#"):
            if href[1:] not in parser.ids:
                broken.append(href)
        elif (
            "://" in href
            or href.startswith(("/", "//", "data:", "javascript:"))
            or not (run_dir / unquote(href)).is_file()
        ):
            broken.append(href)
    return broken


def test_self_contained_verdict_first_and_every_link_resolves(
    sample_run: RunResult, tmp_path: Path
) -> None:
    files = _run_dir(sample_run, tmp_path)
    html = render_html(sample_run, files=files, timeline=timeline(sample_run))
    parser = _Links()
    parser.feed(html)
    assert not {"script", "link", "iframe", "img", "object"} & set(parser.tags)
    assert not parser.sources and "url(" not in html and "@import" not in html
    assert '<meta name="viewport"' in html
    assert html.index("<h2>Verdict</h2>") < html.index('id="verdict-matrix"')
    assert html.index('id="verdict-matrix"') < html.index("<h2>Observers</h2>")
    assert broken_links(html, tmp_path) == []
    for s in sample_run.scenarios:
        assert f'href="#scenario-{s.name}"' in html
    assert f'href="{files[0].path}"' in html
    assert html.count("<svg") == 2 * len(sample_run.scenarios)  # one per invocation


def test_a_link_pointing_nowhere_is_caught(sample_run: RunResult, tmp_path: Path) -> None:
    files = _run_dir(sample_run, tmp_path)
    html = render_html(sample_run, files=files)
    (tmp_path / files[0].path).unlink()
    assert broken_links(html, tmp_path) == [files[0].path]
    assert broken_links(html + '<a href="#nowhere">x</a>', tmp_path)[-1] == "#nowhere"


def test_client_text_is_escaped_and_bounded() -> None:
    html = render_html(hostile_run(), files=None)
    parser = _Links()
    parser.feed(html)
    assert not {"script", "img", "font", "para", "h1"} & set(parser.tags) - {"h1"}
    assert parser.tags.count("h1") == 1
    assert "&lt;script&gt;" in html and "<script" not in html
    assert len(html) < 1_000_000 and "more bytes in results.json)" in html


def test_swimlanes_keep_the_order_and_bound_a_flood() -> None:
    rows = [
        {
            "t_ns": 5_000 - i,
            "source": "strace",
            "event": f"read {i}",
            "scenario": "s",
            "repetition": 1,
            "pass": "strace",
            "invocation": 1,
        }
        for i in range(1_000)
    ]
    rows.append(
        {
            "t_ns": 1,
            "source": "client",
            "event": "start",
            "scenario": "s",
            "repetition": 1,
            "pass": "strace",
            "invocation": 1,
        }
    )
    (chart,) = swimlanes(rows)
    lanes = {title: (marks, omitted) for title, marks, omitted in chart.lanes}
    assert lanes["claims"][0][0].event == "start" and chart.start_ns == 1
    marks, omitted = lanes["syscalls"]
    assert len(marks) == MARKS_PER_LANE and omitted == 1_000 - MARKS_PER_LANE
    assert [m.t_ns for m in marks] == sorted(m.t_ns for m in marks)
    assert set(lanes) >= {"claims", "syscalls", "packets", "receiver", "decoy", "verifier"}


def _chromium() -> str:
    path = shutil.which("chromium")
    require("chromium", path is not None, "chromium not installed (Debian package chromium)")
    assert path is not None
    return path


def _browser(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    return subprocess.run(
        [_chromium(), *flags, *args], capture_output=True, text=True, timeout=120, check=True
    )


def test_chromium_renders_the_matrix_and_every_scenario(
    sample_run: RunResult, tmp_path: Path
) -> None:
    files = _run_dir(sample_run, tmp_path)
    page = tmp_path / "report.html"
    page.write_text(render_html(sample_run, files=files, timeline=timeline(sample_run)))
    dom = _browser(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert 'id="verdict-matrix"' in dom
    for s in sample_run.scenarios:
        assert f'id="scenario-{s.name}"' in dom
    assert broken_links(dom, tmp_path) == []
    shot = tmp_path / "phone.png"
    _browser(tmp_path, "--window-size=390,1400", f"--screenshot={shot}", page.as_uri())
    if not shot.is_file() or shot.stat().st_size < 10_000:
        pytest.fail("Chromium wrote no (or a blank) screenshot of report.html")
