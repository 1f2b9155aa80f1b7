"""The PDF report drawn in a process of its own while the lab finishes everything else (the
lab's side; the drawer's is ``lab.reports.drawer``).

reportlab is pure Python: importing it and parsing the five embedded DejaVu fonts costs
about 0.1 s of CPU, and drawing a default run's eleven pages about 0.13 s more, all on the
lab's one interpreter lock. ``python -m lab run`` and ``lab evaluate`` start the drawer
before the lab's own modules are imported (``lab._start``), so that its warm-up runs on the
core those imports leave idle; used as a library, the lab forks one before a run's passes
start (no thread exists yet, so the fork copies nothing half-held). The drawer warms up
(reportlab, the fonts), then waits. Once the results exist the lab hands it the results
model (``RunResult.to_dict()``, read back with ``RunResult.from_dict`` exactly as ``lab
merge`` reads a shard), the archived-file table and the timeline's path; the drawer writes
``report.pdf`` while the lab writes ``results.json``, ``report.md`` and ``report.html``. The
PDF's bytes are those :func:`lab.reports.drawer.draw_here` draws in the lab itself
(tests/unit/pipeline/test_drawing.py compares them).

    with drawer() as pdf:            # lab._start's drawer, or one forked here; None where
        ...                          # neither is possible; the passes
        job = pdf.draw(run, run_dir / "report.pdf", files=files, timeline=timeline_path)
        ...                          # results.json, report.md, report.html
        job.wait()                   # ReportError naming what failed; never a lost PDF

A drawer that is gone (killed, out of memory) is replaced by drawing in the lab itself, and
the record says nothing different: the PDF is the same either way. The drawer ignores
SIGINT (the lab's own handler decides what an interrupted run keeps) and exits when the lab
closes its end of the pipe, whatever became of the lab.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lab import _start, errors
from lab.errors import LabError
from lab.model import RunResult
from lab.reports import ArchivedFile
from lab.reports import drawer as drawer_side

#: how long the lab waits for the drawer's PDF before drawing it itself (a default run's
#: takes 0.15 s; a 1,000-scenario run's a few seconds)
DRAW_TIMEOUT_S = 600.0


#: what the lab itself needs once the results exist (the Markdown and HTML presenters, the
#: archive's signing): imported by ``warm_imports`` while the passes run, so that none of it
#: is imported after the last pass. results.json's validator (jsonschema, ~60 ms of imports)
#: is not among them: it is imported after the PDF is handed to the drawer, beside the
#: drawing, not on the one core the passes leave while busy-spin spins
#: (``lab.pipeline.stages.report``)
FINISHING_MODULES = (
    "lab.reports.markdown",
    "lab.reports.html",
    "lab.reports.swimlanes",
    "lab.evidence.archive",
    "lab.evidence.provenance",
)


def warm_imports() -> None:
    """Import ``FINISHING_MODULES`` (about 0.05 s of imports that would otherwise run after
    the last pass, on the run's critical path): give it to ``Setup.later``, which runs it
    beside the passes."""
    for name in FINISHING_MODULES:
        with contextlib.suppress(Exception):  # imported again, and failing loudly, later
            importlib.import_module(name)


@dataclass
class Job:
    """One PDF being drawn; ``wait()`` returns once ``out`` is written."""

    drawer: Drawer | None
    run: RunResult
    out: Path
    files: list[ArchivedFile] | None
    timeline: Path | None
    sent: bool

    def wait(self) -> None:
        """Return once the PDF is written; a LabError the drawer met (a font missing, say)
        is raised here as the same kind with the same sentence. Anything else (a drawer
        gone, a bug) draws it again here, where an error is raised as itself."""
        if self.drawer is not None and self.sent:
            answer = self.drawer.answer(DRAW_TIMEOUT_S)
            if answer is None:
                return
            kind, name, text = answer
            if kind == "lab":
                raise _lab_error(name)(text)
        drawer_side.draw_here(self.run, self.out, files=self.files, timeline=self.timeline)

    def discard(self) -> None:
        """Return once the drawer is done with this job, whatever its answer, drawing
        nothing here (the caller removes the PDF: its results were refused)."""
        if self.drawer is not None and self.sent:
            self.drawer.answer(DRAW_TIMEOUT_S)


def _lab_error(name: str) -> type[LabError]:
    found = getattr(errors, name, None)
    return found if isinstance(found, type) and issubclass(found, LabError) else LabError


class _Process(Protocol):
    """What the lab does with its drawer's process (a forked ``multiprocessing`` one, or
    the one ``lab._start`` started, seen through :class:`_Started`)."""

    def is_alive(self) -> bool: ...

    def kill(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...


class _Started:
    """The drawer ``lab._start`` started, as a :class:`_Process`."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        self.popen.kill()

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout)


class Drawer:
    """The drawer process and the lab's end of its pipe."""

    def __init__(self, process: _Process, conn: multiprocessing.connection.Connection) -> None:
        self.process = process
        self.conn = conn
        self._lock = threading.Lock()

    def draw(
        self, run: RunResult, out: Path, *, files: list[ArchivedFile] | None, timeline: Path | None
    ) -> Job:
        """Hand the drawer one PDF; a drawer that cannot take it leaves the job to ``wait``,
        which then draws it here."""
        job = {
            "result": run.to_dict(),
            "out": str(out),
            "files": None if files is None else [f.__dict__ for f in files],
            "timeline": None if timeline is None else str(timeline),
        }
        with self._lock:
            try:
                self.conn.send(job)
                sent = True
            except (OSError, ValueError):
                sent = False
        return Job(self, run, out, files, timeline, sent)

    def answer(self, timeout: float) -> tuple[str, str, str] | None:
        """The drawer's answer: None (drawn), or (kind, error class, sentence), kind "lab",
        "bug" or "gone" (no answer: the drawer ended or took longer than ``timeout``)."""
        with self._lock:
            try:
                if not self.conn.poll(timeout):
                    self.stop()
                    return ("gone", "", "no answer in time")
                got: tuple[str, str, str] | None = self.conn.recv()
                return got
            except (EOFError, OSError):
                return ("gone", "", "the drawer ended")

    def stop(self) -> None:
        """End the drawer. Every job it was given has been waited for by then (or given up
        on), so nothing is lost by killing it: it may still be warming up, and an error that
        ends the run early should not wait for reportlab's import."""
        with contextlib.suppress(OSError):
            self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)


@contextlib.contextmanager
def drawer() -> Iterator[Drawer | None]:
    """The drawer ``lab._start`` started for this command, else one forked now (None where
    fork is not available or threads already run: a fork then could copy a lock another
    thread holds)."""
    made: Drawer | None = None
    early = _start.take_drawer()
    if early is not None:
        popen, end = early
        made = Drawer(_Started(popen), multiprocessing.connection.Connection(end.detach()))
    elif hasattr(os, "fork") and threading.active_count() == 1:
        try:
            context = multiprocessing.get_context("fork")
            ours, theirs = context.Pipe()
            process = context.Process(
                target=drawer_side.serve, args=(theirs,), name="lab-pdf", daemon=True
            )
            process.start()
            theirs.close()
            made = Drawer(process, ours)
        except OSError:
            made = None
    try:
        yield made
    finally:
        if made is not None:
            made.stop()
