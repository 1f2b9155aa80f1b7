"""Presenters: they draw a :class:`lab.model.RunResult`; they never run a process and never
compute a figure the model lacks (small derived figures live as pure functions beside the
drawing code, e.g. :func:`lab.reports.charts.tracing_overhead`).

    from lab.reports import ArchivedFile
    from lab.reports.markdown import render_markdown
    from lab.reports.pdf import render_pdf

    files = [ArchivedFile(path="results.json", size=18_234, sha256="9f2c...")]
    (run_dir / "report.md").write_text(render_markdown(run, files=files))
    render_pdf(run, run_dir / "report.pdf", files=files)

The renderers are imported from their own modules so that code which only needs
:class:`ArchivedFile` (the archive writer) does not import reportlab.

Both reports draw the same rows, built by the modules named for what they describe:
``table`` (:class:`~lab.reports.table.Table` and the ``fmt*`` cells), ``run``, ``scenario``,
``observers``, ``repetitions``, ``evaluation`` and ``files``. The views are ``markdown``,
``pdf`` (with ``pdf_blocks`` and ``charts``), ``html`` (with ``html_svg`` and
``swimlanes``) and ``console``; the first three walk one outline (``outline``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: The report files: they cannot list their own digest, so the file table names them
#: "this report" and points at SHA256SUMS, which covers them.
REPORT_FILES: tuple[str, ...] = ("report.md", "report.pdf", "report.html")


@dataclass(frozen=True)
class ArchivedFile:
    """One file of the evidence archive, as the archive writer measured it."""

    #: path relative to the run directory, with "/" separators
    path: str
    size: int
    sha256: str

    @classmethod
    def of_bytes(cls, path: str, data: bytes) -> ArchivedFile:
        """Describe ``data`` stored at run-relative ``path``."""
        return cls(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest())


__all__ = ["REPORT_FILES", "ArchivedFile"]
