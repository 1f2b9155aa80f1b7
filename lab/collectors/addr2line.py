"""binutils' addr2line, kept running for a run's ``perf report``s (their inline frames).

``perf report`` (6.1) names each call chain's inlined functions by starting ``addr2line -e
DSO -i -f`` for every shared object of every report, and binutils' addr2line reads the
object's debug information before its first answer: about 55 ms for libc's (Debian's
``libc6-dbg``), two thirds of a report's CPU, paid again by each of a run's dozens of
reports. ``perf report --no-inline`` would save it and lose the inlined rows, so the lab
keeps perf's own answers and makes them cheaper:

* while a run has perf passes, ``serving`` runs the addr2line server
  (``lab/collectors/addr2line_server.py``, a process of its own) on a Unix socket in a
  private directory, and a perf report's environment (``env``) names the relay's directory
  as perf's exec path, which perf puts first on the PATH it finds addr2line on;
* perf starts the relay (``native/a2l/lab-a2l.c``, installed as ``addr2line``) as it would
  start binutils'; the relay sends the object's path to the server and copies perf's
  requests and the answers, byte for byte;
* the server answers from one binutils ``addr2line -a -i -f -e DSO`` per shared object,
  started once and kept for the run (an object in a pass's box, under the temporary
  directory, gets one per report). Each is recorded in the run's ``commands.jsonl`` when
  it ends.

Nothing perf prints changes: binutils gives every answer, and the server only frames them
(``tests/integration/test_addr2line.py`` compares reports with and without it, byte for
byte). When the relay cannot be built (no C compiler) or binutils is missing, ``serving``
starts nothing and perf starts binutils itself, as before; when the server cannot be
reached (not yet listening, or gone), the relay executes binutils.

    with serving(log, wanted=True):              # the run's command log
        run(["perf", "report", ...], env={**os.environ, **env(log)})
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.host.procs import Background, CommandLog, Completed, run
from lab.sandbox.helpers import NativeHelper

#: the relay perf starts under binutils' name (in a directory of its own)
RELAY = NativeHelper("addr2line", "native/a2l/lab-a2l.c", "perf report's addr2line relay")
SERVER = Path(__file__).with_name("addr2line_server.py")


class Serving:
    """One running server: its process, its socket and what a perf report's environment
    adds."""

    def __init__(self, binutils: str, relay: Path, log: CommandLog) -> None:
        self.log = log
        self.directory = Path(tempfile.mkdtemp(prefix="lab-a2l-"))
        self.socket = self.directory / "socket"
        self.records = self.directory / "addr2line.jsonl"
        added = {
            # perf puts its exec path first on the PATH its children are found on, before
            # the directory of its own binary (/usr/bin, which holds binutils' addr2line)
            "PERF_EXEC_PATH": str(relay.parent),
            "LAB_A2L_SOCKET": str(self.socket),
            "LAB_A2L_REAL": binutils,
        }
        helpers = perf_exec_path()
        if helpers is not None:  # perf's own helpers (perf-read-vdso*) are still found, last
            added["PATH"] = os.pathsep.join((os.environ.get("PATH", os.defpath), helpers))
        self.added = added
        self.process = Background(
            [sys.executable, "-I", "-S", str(SERVER), str(self.socket), binutils],
            purpose="addr2line server for perf report's inline frames",
            log=log,
            stdout=self.records,
            stop_signal=signal.SIGTERM,
            grace_s=10.0,
        ).start()

    def close(self) -> None:
        """Stop the server, then record every addr2line it ran in the run's commands."""
        try:
            self.process.stop()
            for line in self.records.read_text(encoding="utf-8").splitlines():
                self.log.record(_completed(json.loads(line)))
        except (OSError, ValueError, KeyError):
            pass  # the reports are whole either way; only their helpers' records are lost
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def _completed(row: dict[str, Any]) -> Completed:
    """One addr2line the server ran, as the run's command log records a command."""
    argv = [str(a) for a in row["argv"]]
    return Completed(
        argv=argv,
        purpose=f"addr2line kept for perf report's inline frames ({argv[-1]})",
        exit_status=row["exit_status"],
        duration_s=float(row["duration_s"]),
        stdout_path=None,
        stderr_path=None,
        started_at=float(row["started_at"]),
        timed_out=False,
        killed_by_signal=row["killed_by_signal"],
        cpu_s=row["cpu_s"],
        max_rss_kib=row["max_rss_kib"],
    )


def perf_exec_path() -> str | None:
    """perf's own directory of helper programs (``perf --exec-path``), or None."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    try:
        done = run([perf, "--exec-path"], purpose="perf's exec path", timeout=30.0, capture=True)
    except LabError:
        return None
    text = (done.output or b"").decode(errors="replace").strip()
    return text or None


#: each run's server, by the run's command log (the log its addr2line processes go into):
#: a run never records another's, and a report finds its own run's through its context
_servers: dict[CommandLog, tuple[Serving | None, int]] = {}
_guard = threading.Lock()


def env(log: CommandLog) -> dict[str, str]:
    """What a perf report's environment adds while its run serves addr2line; else nothing."""
    with _guard:
        found = _servers.get(log)
    server = found[0] if found is not None else None
    return dict(server.added) if server is not None else {}


def _start(log: CommandLog) -> Serving | None:
    binutils = shutil.which("addr2line")
    if binutils is None:
        return None  # perf finds no addr2line either, with or without the lab
    try:
        relay = RELAY.path()
        return Serving(binutils, relay, log)
    except LabError:
        return None  # no C compiler, say: perf starts binutils itself, as before


@contextlib.contextmanager
def serving(log: CommandLog, *, wanted: bool) -> Iterator[None]:
    """Serve addr2line to the perf reports of the run that logs to ``log`` while this block
    runs, when ``wanted`` (a run with perf passes); a nested block of the same run shares its
    server, which the outermost block stops."""
    if not wanted:
        yield
        return
    with _guard:
        server, users = _servers.get(log, (None, 0))
        if users == 0:
            server = _start(log)
        _servers[log] = (server, users + 1)
    try:
        yield
    finally:
        with _guard:
            server, users = _servers.pop(log)
            if users > 1:
                _servers[log] = (server, users - 1)
                server = None
        if server is not None:
            server.close()
