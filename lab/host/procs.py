"""The one process wrapper: every external command the lab runs goes through here.

It owns the argument list (never a shell), where stdout and stderr are kept, the accepted
return codes, the time-out, process-group clean-up, and the ``commands.jsonl`` record that
lets a reviewer replay any observation.

    log = CommandLog(run_dir / "commands.jsonl", root=run_dir)
    done = run(["strace", "-V"], log=log, purpose="tool version", tool="strace")
    with Background(["tcpdump", "-i", "lo", ...], log=log, purpose="capture") as capture:
        ...
    capture.result  # Completed, once the context has exited

Paths under the run directory are written relative to it (``$RUN/...``) so that
``commands.jsonl`` does not leak host paths and is the same from one machine to another.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from lab.errors import LabError, ToolMissingError
from lab.host.live import ProcessScope as ProcessScope
from lab.host.live import kill_group, register, unregister
from lab.host.live import live_processes as live_processes
from lab.host.live import process_scope as process_scope
from lab.host.live import stop_all as stop_all
from lab.host.live import stopping_everything as stopping_everything
from lab.host.tools import TOOL_PACKAGES

#: bound on how much of a failing command's stderr goes into an error message
STDERR_EXCERPT = 400


class CommandFailed(LabError):
    """A command exited with a status it does not accept."""

    def __init__(self, message: str, completed: Completed) -> None:
        super().__init__(message)
        self.completed = completed


@dataclass
class Completed:
    """What happened to one command."""

    argv: list[str]
    purpose: str
    exit_status: int | None
    duration_s: float
    stdout_path: str | None
    stderr_path: str | None
    started_at: float
    timed_out: bool = False
    killed_by_signal: int | None = None
    #: user + system CPU seconds of the process and its waited-for descendants
    cpu_s: float | None = None
    max_rss_kib: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: stdout bytes when run with ``capture=True`` (not written to commands.jsonl)
    output: bytes | None = field(default=None, repr=False)

    def stderr_excerpt(self) -> str:
        if not self.stderr_path or not os.path.exists(self.stderr_path):
            return ""
        with open(self.stderr_path, "rb") as fh:
            data = fh.read()
        text = data.decode("utf-8", "replace").strip()
        if len(text) > STDERR_EXCERPT:
            text = "…" + text[-STDERR_EXCERPT:]
        return text


class CommandLog:
    """Appends one JSON line per finished command to ``commands.jsonl``."""

    def __init__(self, path: Path, *, root: Path | None = None) -> None:
        self.path = path
        self.root = root
        #: the run directory resolved once (a client's command line holds a hundred words,
        #: each compared with it; resolving it per word cost a realpath walk each time)
        self._root_text = str(root.resolve()) if root is not None else None
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def mask(self, value: str) -> str:
        root = self._root_text
        if root is not None and value.startswith(root):
            return "$RUN" + value[len(root) :]
        return value

    def record(self, done: Completed) -> None:
        row = asdict(done)
        row.pop("output", None)
        row["argv"] = [self.mask(a) for a in done.argv]
        for key in ("stdout_path", "stderr_path"):
            if row[key]:
                row[key] = self.mask(os.path.realpath(row[key]))
        row["duration_s"] = round(done.duration_s, 6)
        if done.cpu_s is not None:
            row["cpu_s"] = round(done.cpu_s, 6)
        line = json.dumps(row, sort_keys=True)
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def which(tool: str) -> str | None:
    return shutil.which(tool)


def missing_tool(tool: str) -> str:
    """One sentence: ``tool`` is missing, and the Debian package that brings it."""
    package = TOOL_PACKAGES.get(tool, tool)
    return (
        f"{tool} is not installed or not on PATH; install the Debian package "
        f"'{package}' (apt-get install {package})."
    )


def require_tool(tool: str) -> str:
    """Return the tool's path or raise one sentence naming the package to install."""
    path = which(tool)
    if path is None:
        raise ToolMissingError(missing_tool(tool))
    return path


#: where a child's output goes: a file path, an open descriptor (a pipe's write end, which
#: the caller keeps and closes), or nowhere
Output = Path | int | None


def _open_out(path: Output) -> IO[bytes] | int:
    if path is None:
        return subprocess.DEVNULL
    if isinstance(path, int):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "wb")


def _spawn(
    argv: Sequence[str],
    *,
    purpose: str,
    tool: str | None,
    stdout: Output,
    stderr: Output,
    stdin: Path | None,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    if tool is not None:
        require_tool(tool)
    out = _open_out(stdout)
    err = _open_out(stderr)
    inp: IO[bytes] | int = subprocess.DEVNULL
    if stdin is not None:
        inp = open(stdin, "rb")  # noqa: SIM115 - closed in the finally below
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=err,
            stdin=inp,
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd is not None else None,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except FileNotFoundError as exc:
        name = tool or os.path.basename(argv[0])
        package = TOOL_PACKAGES.get(name)
        hint = f"; install the Debian package '{package}'" if package else ""
        raise ToolMissingError(f"{argv[0]} could not be started ({exc.strerror}){hint}.") from exc
    except PermissionError as exc:
        raise ToolMissingError(f"{argv[0]} is not executable ({exc.strerror}).") from exc
    finally:
        for handle in (out, err, inp):
            if not isinstance(handle, int):
                handle.close()
    register(proc.pid, purpose)
    return proc


def _reap(proc: subprocess.Popen[bytes], timeout: float | None) -> tuple[int, Any, bool]:
    """Wait for ``proc`` with ``wait4`` (for its rusage); kill its group on time-out."""
    box: dict[str, Any] = {}

    def waiter() -> None:
        while True:
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            except ChildProcessError:
                box["status"], box["usage"] = 0, None
                return
            except InterruptedError:
                continue
            box["status"], box["usage"] = status, usage
            return

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    thread.join(timeout)
    timed_out = False
    if thread.is_alive():
        timed_out = True
        kill_group(proc.pid, signal.SIGTERM)
        thread.join(2.0)
        if thread.is_alive():
            kill_group(proc.pid, signal.SIGKILL)
            thread.join()
    # The leader is reaped; stragglers in its group (a tracer's children) go too.
    kill_group(proc.pid, signal.SIGKILL)
    unregister(proc.pid)
    status = int(box["status"])
    proc.returncode = os.waitstatus_to_exitcode(status)
    return status, box["usage"], timed_out


def _completed(
    argv: Sequence[str],
    purpose: str,
    status: int,
    usage: Any,
    started: float,
    t0: float,
    stdout: Output,
    stderr: Output,
    timed_out: bool,
) -> Completed:
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    cpu = None
    rss = None
    if usage is not None:
        cpu = float(usage.ru_utime + usage.ru_stime)
        rss = int(usage.ru_maxrss)
    return Completed(
        argv=list(argv),
        purpose=purpose,
        exit_status=code,
        duration_s=time.monotonic() - t0,
        stdout_path=str(stdout) if isinstance(stdout, Path) else None,
        stderr_path=str(stderr) if isinstance(stderr, Path) else None,
        started_at=started,
        timed_out=timed_out,
        killed_by_signal=signum,
        cpu_s=cpu,
        max_rss_kib=rss,
    )


def run(
    argv: Sequence[str],
    *,
    purpose: str,
    log: CommandLog | None = None,
    tool: str | None = None,
    stdout: Output = None,
    stderr: Output = None,
    stdin: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = 600.0,
    accept: Sequence[int] | None = (0,),
    capture: bool = False,
    pass_fds: Sequence[int] = (),
) -> Completed:
    """Run ``argv`` to completion and record it.

    ``capture=True`` keeps stdout in ``Completed.output`` (through a temporary file when no
    ``stdout`` path is given, so a large output cannot block the child).

    ``accept=None`` accepts any exit status (the caller judges it, e.g. the client).
    Otherwise an exit status outside ``accept``, a signal or a time-out raises
    :class:`CommandFailed` naming the command and quoting the end of its stderr.
    """
    scratch: Path | None = None
    if capture and stdout is None:
        fd, name = tempfile.mkstemp(prefix="lab-capture-")
        os.close(fd)
        scratch = stdout = Path(name)
    started = time.time()
    t0 = time.monotonic()
    proc = _spawn(
        argv,
        purpose=purpose,
        tool=tool,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        env=env,
        cwd=cwd,
        pass_fds=pass_fds,
    )
    status, usage, timed_out = _reap(proc, timeout)
    done = _completed(argv, purpose, status, usage, started, t0, stdout, stderr, timed_out)
    if capture and isinstance(stdout, Path):
        done.output = stdout.read_bytes()
    if scratch is not None:
        scratch.unlink(missing_ok=True)
        done.stdout_path = None
    if log is not None:
        log.record(done)
    if accept is not None and (timed_out or done.exit_status not in accept):
        name = os.path.basename(argv[0])
        if timed_out:
            why = f"did not finish within {timeout:g} s"
        elif done.killed_by_signal is not None:
            why = f"was killed by signal {done.killed_by_signal}"
        else:
            why = f"exited with status {done.exit_status}"
        excerpt = done.stderr_excerpt()
        tail = f": {excerpt}" if excerpt else ""
        raise CommandFailed(f"{name} ({purpose}) {why}{tail}", done)
    return done


class Background:
    """A long-running helper (tcpdump, a tracer) stopped by signal when the context exits.

    ``stop_signal`` is sent to the whole process group; after ``grace_s`` it is killed.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        purpose: str,
        log: CommandLog | None = None,
        tool: str | None = None,
        stdout: Output = None,
        stderr: Output = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stop_signal: int = signal.SIGINT,
        grace_s: float = 5.0,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.argv = list(argv)
        self.purpose = purpose
        self.log = log
        self.tool = tool
        self.stdout = stdout
        self.stderr = stderr
        self.env = env
        self.cwd = cwd
        self.stop_signal = stop_signal
        self.grace_s = grace_s
        self.pass_fds = tuple(pass_fds)
        self.proc: subprocess.Popen[bytes] | None = None
        self.result: Completed | None = None
        self._started = 0.0
        self._t0 = 0.0

    def __enter__(self) -> Background:
        self._started = time.time()
        self._t0 = time.monotonic()
        self.proc = _spawn(
            self.argv,
            purpose=self.purpose,
            tool=self.tool,
            stdout=self.stdout,
            stderr=self.stderr,
            stdin=None,
            env=self.env,
            cwd=self.cwd,
            pass_fds=self.pass_fds,
        )
        return self

    def start(self) -> Background:
        """Start it without a ``with`` block; the caller then waits for it or stops it."""
        return self.__enter__()

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def wait(self, timeout: float | None) -> Completed:
        """Wait for the process to end by itself (its group is killed after ``timeout``;
        ``Completed.timed_out`` then says so) and record it. Idempotent."""
        if self.result is not None:
            return self.result
        assert self.proc is not None
        status, usage, timed_out = _reap(self.proc, timeout)
        return self._finish(status, usage, timed_out)

    def _finish(self, status: int, usage: Any, timed_out: bool) -> Completed:
        self.result = _completed(
            self.argv,
            self.purpose,
            status,
            usage,
            self._started,
            self._t0,
            self.stdout,
            self.stderr,
            timed_out,
        )
        if self.log is not None:
            self.log.record(self.result)
        return self.result

    def alive(self) -> bool:
        """True while the process runs; never reaps it (``stop`` needs its rusage)."""
        if self.proc is None or self.proc.returncode is not None:
            return False
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return False
        return info is None

    def stop(self) -> Completed:
        if self.result is not None:
            return self.result
        assert self.proc is not None
        if self.proc.returncode is None:
            kill_group(self.proc.pid, self.stop_signal)
        status, usage, timed_out = _reap(self.proc, self.grace_s)
        return self._finish(status, usage, timed_out)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
