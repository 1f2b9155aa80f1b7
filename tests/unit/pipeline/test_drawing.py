"""The PDF drawer (lab.pipeline.drawing): started by lab._start before the lab's imports, or
forked before any thread, it draws the very bytes the lab draws itself, says a LabError it
met as the same kind and sentence, and a drawer that is gone leaves the PDF to the lab. Each
case runs in a fresh interpreter, so that no thread of the test session stops the fork."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "tests" / "assets" / "reports" / "sample-results.json"

PRELUDE = f"""
import json, sys
from pathlib import Path
from lab.model import RunResult
from lab.pipeline import drawing
from lab.reports import drawer as drawer_side
run = RunResult.from_dict(json.loads(Path({str(SAMPLE)!r}).read_text()))
out = Path(sys.argv[1])
"""


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_drawer_draws_the_bytes_the_lab_draws(tmp_path: Path) -> None:
    done = _python(
        """
with drawing.drawer() as pdf:
    assert pdf is not None, "no drawer was forked"
    pdf.draw(run, out / "drawer.pdf", files=None, timeline=None).wait()
    assert pdf.process.is_alive()
drawer_side.draw_here(run, out / "here.pdf", files=None, timeline=None)
print("ok")
""",
        tmp_path,
    )
    assert done.stdout.strip() == "ok", done.stderr
    drawn = (tmp_path / "drawer.pdf").read_bytes()
    assert drawn.startswith(b"%PDF") and drawn == (tmp_path / "here.pdf").read_bytes()


def test_the_drawer_started_before_the_imports_is_taken_and_draws_the_same_bytes(
    tmp_path: Path,
) -> None:
    done = _python(
        """
from lab import _start
_start._early = _start.start_drawer()      # what python -m lab run does first
with drawing.drawer() as pdf:
    assert isinstance(pdf.process, drawing._Started), "the started drawer was not taken"
    assert _start.take_drawer() is None    # taken once
    pdf.draw(run, out / "started.pdf", files=None, timeline=None).wait()
    popen = pdf.process.popen
    assert popen.poll() is None
assert popen.poll() is not None            # stopped with the run
drawer_side.draw_here(run, out / "here.pdf", files=None, timeline=None)
print("ok")
""",
        tmp_path,
    )
    assert done.stdout.strip() == "ok", done.stderr
    drawn = (tmp_path / "started.pdf").read_bytes()
    assert drawn.startswith(b"%PDF") and drawn == (tmp_path / "here.pdf").read_bytes()


def test_a_started_drawer_nothing_took_is_stopped_and_one_left_alone_ends_by_itself() -> None:
    from lab import _start

    _start._early = _start.start_drawer()
    popen = _start._early[0]
    # nothing of the drawer's reaches the lab's terminal (what it cannot draw, the lab does)
    assert all(os.readlink(f"/proc/{popen.pid}/fd/{fd}") == "/dev/null" for fd in (0, 1, 2))
    _start.stop_unused()
    assert popen.wait(10) is not None and _start.take_drawer() is None
    # the lab gone (its end of the pipe closed) ends the drawer, warm or not
    popen, ours = _start.start_drawer()
    ours.close()
    assert popen.wait(60) == 0


def test_only_the_commands_that_draw_start_a_drawer() -> None:
    from lab._start import wants_drawer

    assert wants_drawer(["run", "--all"]) and wants_drawer(["evaluate", "--local"])
    for argv in ([], ["--version"], ["verify", "x.tar.gz"], ["run", "--help"], ["doctor"]):
        assert not wants_drawer(argv), argv


def test_a_lab_error_in_the_drawer_is_raised_as_itself(tmp_path: Path) -> None:
    done = _python(
        """
from lab.errors import ToolMissingError
from lab.reports import fonts

def missing(directory=None):
    raise ToolMissingError("The PDF report embeds the font DejaVuSans.ttf: install it.")

fonts.register = missing          # before the fork: the drawer inherits it
with drawing.drawer() as pdf:
    try:
        pdf.draw(run, out / "x.pdf", files=None, timeline=None).wait()
    except ToolMissingError as exc:
        print("raised", type(exc).__name__, exc)
""",
        tmp_path,
    )
    assert done.stdout.startswith("raised ToolMissingError The PDF report embeds"), done.stderr
    assert not (tmp_path / "x.pdf").exists()


def test_a_bug_in_the_drawer_is_drawn_again_here_and_raised_as_itself(tmp_path: Path) -> None:
    done = _python(
        """
with drawing.drawer() as pdf:
    pdf.conn.send({"result": {}, "out": str(out / "x.pdf"), "files": None, "timeline": None})
    kind, name, _ = pdf.conn.recv()
print(kind, name)
""",
        tmp_path,
    )
    # a results document that is not one is the lab's own bug: the drawer says "bug", and
    # Job.wait then draws the PDF itself, where the error is raised with its traceback
    assert done.stdout.split() == ["bug", "ValueError"], done.stderr


def test_a_drawer_that_is_gone_leaves_the_pdf_to_the_lab(tmp_path: Path) -> None:
    done = _python(
        """
with drawing.drawer() as pdf:
    pdf.process.kill()
    pdf.process.join(5)
    pdf.draw(run, out / "drawn.pdf", files=None, timeline=None).wait()
print("ok")
""",
        tmp_path,
    )
    assert done.stdout.strip() == "ok", done.stderr
    assert (tmp_path / "drawn.pdf").read_bytes().startswith(b"%PDF")
    assert "Traceback" not in done.stderr


def test_an_error_ending_the_run_early_leaves_no_traceback_of_the_drawer(tmp_path: Path) -> None:
    done = _python(
        """
from lab.errors import ClientError
try:
    with drawing.drawer() as pdf:
        raise ClientError("the client binary does not exist")
except ClientError:
    print("ok")
""",
        tmp_path,
    )
    assert done.stdout.strip() == "ok" and done.stderr == "", done.stderr


def test_results_refused_by_their_schema_leave_neither_results_nor_a_pdf(tmp_path: Path) -> None:
    # the PDF is handed to the drawer before results.json is validated (lab.pipeline.stages
    # .report); a document the schema refuses is never written, and its PDF is removed once
    # the drawer is done with it
    done = _python(
        """
from lab.errors import SchemaError
from lab.model import ObserverStatus
from lab.pipeline import stages
name = next(iter(run.observers))
run.observers[name] = ObserverStatus(available="yes")
with drawing.drawer() as pdf:
    assert pdf is not None, "no drawer was forked"
    try:
        stages.report(run, out, say=lambda text: None, drawer=pdf)
    except SchemaError as exc:
        print("refused:", f"observers/{name}/available" in str(exc))
print(sorted(p.name for p in out.iterdir()))
""",
        tmp_path,
    )
    lines = done.stdout.strip().splitlines()
    assert lines[:1] == ["refused: True"], done.stderr
    assert all(name not in lines[-1] for name in ("results", "report.pdf")), lines
