"""The PDF drawer's own side: the process that draws ``report.pdf`` while the lab finishes
everything else (``lab.pipeline.drawing`` is the lab's side). It warms up (reportlab, the
fonts), then draws each job it is sent until its pipe closes.

The drawer is either started by ``lab._start`` as a process of its own before the lab's
modules are imported (``python -m lab run``, ``lab evaluate``: it imports only the results
model and the PDF's presenter, :func:`serve_fd`), or forked by ``lab.pipeline.drawing.drawer``
(the lab used as a library). Either way it serves :func:`serve` on a
:class:`multiprocessing.connection.Connection` and draws with :func:`render_pdf` exactly as
the lab would (:func:`draw_here`).

    serve_fd(5)                  # in the drawer: jobs from the socket on fd 5, until EOF
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import signal
from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.model import RunResult
from lab.reports import ArchivedFile


def warm() -> None:
    """What every drawing needs first: reportlab and the fonts (the slow part, done once),
    and the renderer reportlab imports when it draws the first chart."""
    import reportlab.graphics.renderPDF  # noqa: F401 - imported to be ready

    from lab.reports import fonts
    from lab.reports.pdf import render_pdf  # noqa: F401 - imported to be ready

    fonts.register()


def serve(conn: multiprocessing.connection.Connection) -> None:
    """The drawer's life: warm up, then draw each job it is sent until the pipe closes."""
    # the lab's own handlers (lab.run.interrupt) are not the drawer's: it ignores Ctrl-C,
    # and SIGTERM ends it quietly
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # a failure here (a font missing) is met again, and reported, by the first job
    with contextlib.suppress(Exception):
        warm()
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            draw(**job)
            conn.send(None)
        except LabError as exc:
            conn.send(("lab", type(exc).__name__, str(exc)))
        except Exception as exc:  # the lab draws it again, and raises it there as itself
            conn.send(("bug", type(exc).__name__, str(exc)))


def serve_fd(fd: int) -> None:
    """:func:`serve` on the socket ``lab._start`` passed as file descriptor ``fd``."""
    serve(multiprocessing.connection.Connection(fd))


def draw(
    result: dict[str, Any], out: str, files: list[dict[str, Any]] | None, timeline: str | None
) -> None:
    """One job as the lab sends it (``lab.pipeline.drawing.Drawer.draw``)."""
    run = RunResult.from_dict(result)
    archived = None if files is None else [ArchivedFile(**f) for f in files]
    draw_here(run, Path(out), files=archived, timeline=None if timeline is None else Path(timeline))


def draw_here(
    run: RunResult, out: Path, *, files: list[ArchivedFile] | None, timeline: Path | None
) -> None:
    """The drawing itself, in whichever process calls it."""
    from lab.reports.pdf import render_pdf
    from lab.reports.swimlanes import timeline_rows

    rows = timeline_rows(timeline) if timeline is not None else []
    render_pdf(run, out, files=files, timeline=rows)
