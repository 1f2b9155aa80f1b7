"""The ``lab`` program's first step (``lab.__main__.main``: ``python -m lab`` and the console
script), taken before any of the lab's other modules is imported: for a command that draws a
PDF report (``lab run``, ``lab evaluate``), the PDF's drawer starts here as a process of its
own
(``lab.reports.drawer``), so that its warm-up (the results model, reportlab, the fonts:
about 0.25 s of CPU) runs on the core the lab's own imports leave idle, not beside the
passes (docs/performance.md, round 11). ``lab.pipeline.drawing.drawer`` takes it; one never
taken (the arguments refused, say, or a run handed to the lab's image) is stopped on the way
out (:func:`stop_unused`).

    if wants_drawer(sys.argv[1:]):
        start_early()           # then lab._cli is imported and runs

Only the standard library is imported here.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from pathlib import Path

#: the commands that draw a PDF (the first word after the program's name)
DRAWING_COMMANDS = frozenset({"run", "evaluate"})

#: the drawer's code: the lab's import path as the lab has it, its own package first. The
#: interpreter starts without ``site`` (``-S``): the path comes from the lab, whose ``site``
#: already read the ``.pth`` files, and what a ``.pth`` file runs at start-up (this
#: machine's run 30-40 ms of imports) is not the drawer's to run again
_SERVE = (
    "import sys, json; sys.path[:] = [sys.argv[1], *json.loads(sys.argv[3])]; "
    "from lab.reports.drawer import serve_fd; serve_fd(int(sys.argv[2]))"
)

#: the drawer :func:`start_early` started, not yet taken: its process, the lab's end
_early: tuple[subprocess.Popen[bytes], socket.socket] | None = None


def wants_drawer(argv: list[str]) -> bool:
    """Whether these arguments name a command that draws a PDF (not its help)."""
    return bool(argv) and argv[0] in DRAWING_COMMANDS and not {"-h", "--help"} & set(argv)


def start_drawer() -> tuple[subprocess.Popen[bytes], socket.socket]:
    """A drawer process now and the lab's end of the socket pair it reads its jobs from. It
    is in a session of its own (a Ctrl-C at the terminal is the lab's to handle; the lab
    stops the drawer), and it ends by itself once the lab's end is closed."""
    ours, theirs = socket.socketpair()
    try:
        root = str(Path(__file__).resolve().parent.parent)
        path = json.dumps(sys.path)
        process = subprocess.Popen(
            [sys.executable, "-S", "-c", _SERVE, root, str(theirs.fileno()), path],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            # nothing of the drawer's reaches the lab's terminal: whatever it cannot draw
            # (an import that fails, a bug) the lab draws again itself, where the error is
            # reported as the lab reports any (lab.pipeline.drawing.Job.wait)
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return process, ours


def take_drawer() -> tuple[subprocess.Popen[bytes], socket.socket] | None:
    """The drawer :func:`start_early` started, once (None: none was, it was taken, or it
    ended)."""
    global _early
    early, _early = _early, None
    if early is not None and early[0].poll() is not None:
        early[1].close()
        return None
    return early


def stop_unused() -> None:
    """Stop a drawer nothing took."""
    early = take_drawer()
    if early is not None:
        process, ours = early
        ours.close()
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)


def start_early() -> None:
    """Start the drawer :func:`take_drawer` hands over (none where a process cannot be
    started: the lab then forks one, or draws the PDF itself)."""
    global _early
    with contextlib.suppress(OSError):
        _early = start_drawer()
