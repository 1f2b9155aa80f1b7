"""SIGTERM mid-pass (what ``docker stop``, ``timeout`` and Kubernetes send), through the real
lab: ``python -m lab run --all --collector strace --packets off`` is stopped once its first
pass has started. It must exit 130 naming the kept run directory on stderr, mark the run
incomplete (when results.json was written), leave no archive, and leave no process behind:
no client (user lab-client), strace, tcpdump or backup-client of its own 5 s later.

Run it under the shared sandbox's lock: ``flock /tmp/lab-sandbox.lock pytest ...``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.collectors.bpftrace import BpftraceSession
from lab.collectors.strace import StraceCollector
from lab.sandbox.user import ClientUser, default_name
from tests.conftest import ROOT, require

pytestmark = pytest.mark.usefixtures("sandbox_ready")

CLIENT_USER = default_name()  # lab-client, or LAB_CLIENT_USER
LAB_RUN = [sys.executable, "-m", "lab", "run", "--all", "--collector", "strace", "--packets", "off"]


#: what the lab starts for a traced run, besides the client's own processes
WATCHED = frozenset({"strace", "tcpdump", "backup-client", "bwrap", "bpftrace"})


def processes() -> list[tuple[int, int, str, str, str]]:
    """pid, session, user, command and arguments of every process that is not a zombie."""
    done = subprocess.run(
        ["ps", "-eo", "pid=,sid=,stat=,user:32=,comm=,args="], capture_output=True, text=True
    )
    rows = []
    for line in done.stdout.splitlines():
        pid, sid, stat, user, comm, *args = line.split(None, 5)
        if not stat.startswith("Z"):
            rows.append((int(pid), int(sid), user, comm, " ".join(args)))
    return rows


def survivors(session: int, before: set[int], out: Path) -> list[str]:
    """Processes of the sandbox's user, and strace/tcpdump/client processes the lab started
    (its session, or naming its output directory), that were not there before it. The
    machine is shared: another session's tcpdump is not this lab's."""
    return [
        f"{pid} {user} {comm} {args}"
        for pid, sid, user, comm, args in processes()
        if user == CLIENT_USER
        or user in {u.name for u in ClientUser.family()}
        or (pid not in before and comm in WATCHED and (sid == session or str(out) in args))
    ]


def test_sigterm_mid_pass_stops_everything_and_marks_the_run(client: Path, tmp_path: Path) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    # as the strace phase begins (after every untraced pass)
    interrupt(LAB_RUN, "pass strace: ", 1.0, tmp_path)


def test_sigterm_inside_the_shared_bpftrace_session_stops_it_and_its_cgroups(
    client: Path, tmp_path: Path
) -> None:
    """One bpftrace session serves every bpftrace pass, and every pass's cgroups were made
    before it attached: SIGTERM in the middle of that phase must stop bpftrace and leave
    no cgroup of the run behind, the passes that never ran included."""
    status = BpftraceSession.probe()
    require("bpftrace", status.available, status.reason)
    argv = [*LAB_RUN[:-4], "--collector", "bpftrace", "--packets", "off"]
    interrupt(argv, "bpftrace attached in", 0.3, tmp_path)
    [run_dir] = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    left = [str(p) for p in Path("/sys/fs/cgroup").rglob(f"*{run_dir.name}*")]
    assert left == [], f"cgroups of the interrupted run are left: {left}"


def test_sigterm_while_passes_overlap_stops_every_one(client: Path, tmp_path: Path) -> None:
    """--jobs 2: SIGTERM as the first untraced pass finishes, others still running (three
    repetitions keep the overlapping phase going for seconds)."""
    argv = [*LAB_RUN[:-4], "--collector", "none", "--packets", "off", "--jobs", "2"]
    pid = interrupt([*argv, "--repetitions", "3"], "pass none done in", 0.0, tmp_path)
    # every overlapping pass closed its own cell: no namespace of this lab is left
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    assert f"lab-{pid}-" not in namespaces.stdout, namespaces.stdout


def interrupt(argv: list[str], marker: str, wait_s: float, tmp_path: Path) -> int:
    """Start ``argv`` with ``--out``, SIGTERM it ``wait_s`` after ``marker`` appears in its
    output, check everything an interrupted run promises; return the lab's pid."""
    out = tmp_path / "out"
    before = {pid for pid, *_ in processes()}
    assert survivors(-1, before, out) == [], "the sandbox's user has processes already"
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "w") as so, open(stderr, "w") as se:
        proc = subprocess.Popen(
            [*argv, "--out", str(out)],
            cwd=ROOT,
            stdout=so,
            stderr=se,
            start_new_session=True,  # SIGTERM reaches the lab only, as docker stop's would
        )
        try:
            deadline = time.monotonic() + 120
            while marker not in stdout.read_text() + stderr.read_text():
                assert proc.poll() is None, stderr.read_text()
                assert time.monotonic() < deadline, "the first pass never started"
                time.sleep(0.05)
            time.sleep(wait_s)  # inside the pass: the client (and its tracer) are running
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    err = stderr.read_text()
    assert code == 130, (code, err[-3000:])
    assert "Traceback" not in err, err
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    assert str(run_dir.resolve()) in err.replace("\n", ""), err
    assert "SIGTERM" in err and "neither signed nor packed" in err
    results = run_dir / "results.json"
    if results.exists():
        assert json.loads(results.read_text())["incomplete"]["reason"].startswith("SIGTERM")
    assert not list(out.glob("*.tar.gz*"))
    time.sleep(5)
    assert survivors(proc.pid, before, out) == [], "a process outlived the interrupted lab"
    return proc.pid
