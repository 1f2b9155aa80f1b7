"""The reports rendered from stored ``results.json`` documents, kept as goldens.

Every presenter output the lab writes from a results document — ``report.md``,
``report.pdf``, the console summary of ``lab run`` and its ``--json`` document — is rendered
from ``tests/assets/reports/<name>-results.json`` (read back through the model) and stored
under ``tests/assets/reports/golden/``. ``test_reports_golden.py`` renders them again and
compares byte for byte, so a change of layout (a file moved, a reader replaced) cannot change
a report unnoticed.

``python -m tests.unit.reports.golden`` rewrites the results documents and the goldens; only
do that for a deliberate change of a report, and say so in the commit.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from lab.model import RunResult
from lab.reports.console import print_summary
from lab.reports.markdown import render_markdown
from lab.reports.pdf import render_pdf
from lab.reports.summary import run_summary

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "reports"
GOLDEN = ASSETS / "golden"
#: the results documents the goldens are rendered from (``sample`` is the presenters' sample)
DOCUMENTS = ("sample", "repeated")
#: the run directory the ``--json`` summary names (a fixed path, not a real one)
RUN_DIR = Path("/lab/artifacts/run")


def read_run(name: str) -> RunResult:
    document: Any = json.loads((ASSETS / f"{name}-results.json").read_text())
    return RunResult.from_dict(document)


def render_all(run: RunResult, scratch: Path) -> dict[str, bytes]:
    """File name -> bytes of every rendering of ``run`` (the PDF is written in ``scratch``)."""
    pdf = scratch / "report.pdf"
    render_pdf(run, pdf, files=None)
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, highlight=False, color_system=None)
    print_summary(run, console)
    summary = run_summary(run, run_dir=RUN_DIR, archive=None)
    return {
        "report.md": render_markdown(run, files=None).encode(),
        "report.pdf": pdf.read_bytes(),
        "console.txt": buffer.getvalue().encode(),
        "summary.json": (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode(),
    }


def _write() -> None:  # pragma: no cover - regeneration by hand
    import tempfile

    from tests.unit.reports.reports_sample import build_repeated_run, build_sample_run

    builders = {"sample": build_sample_run, "repeated": build_repeated_run}
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in DOCUMENTS:
        text = json.dumps(builders[name]().to_dict(), indent=2, sort_keys=True) + "\n"
        (ASSETS / f"{name}-results.json").write_text(text)
        with tempfile.TemporaryDirectory() as scratch:
            for file, data in render_all(read_run(name), Path(scratch)).items():
                (GOLDEN / f"{name}.{file}").write_bytes(data)
    sys.stdout.write(f"goldens written to {GOLDEN}\n")


if __name__ == "__main__":
    _write()
