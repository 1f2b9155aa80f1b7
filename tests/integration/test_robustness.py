"""A tracer that dies mid-run, an interrupted runner, a collector missing from PATH: the
scenario is still judged from the remaining evidence and no process outlives the run (no
tracer of the lab's, and no process of the client user)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab.collectors.bpftrace import BpftraceSession
from lab.pipeline import RunOutcome, RunRequest, execute
from lab.sandbox.user import ClientUser
from tests.conftest import ROOT, require


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if text in cmdline and int(entry.name) != os.getpid():
            found.append((int(entry.name), comm))
    return found


def _quiet_run(client: Path, out: Path, scenario: str, collector: str) -> RunOutcome:
    """One scenario under one collector, no packets, no archive, nothing printed."""
    return execute(
        RunRequest(
            names=[scenario],
            collector=collector,
            packets="off",
            out=out,
            client=client,
            archive=False,
        ),
        say=lambda _m: None,
    )


def client_processes() -> list[int]:
    """Processes of the client user or any of its slot users (one per pass at once)."""
    return [pid for user in ClientUser.family() for pid in user.processes()]


def children_of(parent: int) -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == parent:
            found.append((int(entry.name), comm))
    return found


def test_tracer_killed_mid_run_is_recorded_and_scenario_still_judged(
    client: Path, tmp_path: Path, sandbox_ready: None
) -> None:
    status = BpftraceSession.probe()
    require("bpftrace", status.available, status.reason)
    killed: list[int] = []

    def attached() -> bool:
        # the session attaches while the untraced pass runs: kill it once it observes
        return any(
            "Attaching" in out.read_text(errors="replace")
            for out in tmp_path.glob("*/sessions/bpftrace-*/bpftrace.txt")
        )

    def assassin() -> None:
        # Kill the bpftrace session once it is attached and a client is running (spinning in
        # busy_wait, its bpftrace pass or the untraced one beside the attach).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            if client_processes() and attached():
                for pid, comm in processes_mentioning(str(tmp_path)):
                    if comm == "bpftrace":
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        return
            time.sleep(0.01)

    thread = threading.Thread(target=assassin)
    thread.start()
    outcome = _quiet_run(client, tmp_path, "busy-spin", "bpftrace")
    thread.join()
    assert killed, "the bpftrace process was never seen"
    scenario = outcome.result.scenarios[0]
    traced = next(p for p in scenario.passes if p.collector == "bpftrace")
    assert traced.error is not None and "bpftrace" in traced.error
    assert "killed by signal 9" in traced.error
    assert scenario.error is None  # the untraced pass executed
    assert scenario.verdicts["C1"].observed == "pass"  # judged from the remaining evidence
    assert not processes_mentioning(str(tmp_path)), "a tracer outlived the run"
    assert not client_processes(), "a client outlived the run"


def test_interrupted_runner_stops_everything(
    client: Path, tmp_path: Path, sandbox_ready: None
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lab",
            "run",
            "busy-spin",
            "--collector",
            "none",
            "--packets",
            "off",
            "--no-archive",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if client_processes():
            break
        time.sleep(0.01)
    assert client_processes(), "the client never started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err.decode()
    assert b"interrupted" in err and b"Traceback" not in err
    time.sleep(0.2)
    assert not client_processes(), "a client outlived the run"


def test_collector_missing_from_path_is_named_and_rest_judged(
    client: Path, tmp_path: Path, sandbox_ready: None
) -> None:
    status = BpftraceSession.probe()
    require("bpftrace", status.available, status.reason)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = ("strace", "perf", "tcpdump", "nm", "make", "cc", "git", "uname")
    sandbox = ("bwrap", "capsh", "nsenter", "prlimit", "ip", "useradd", "mount")
    for tool in tools + sandbox:
        for d in os.environ["PATH"].split(os.pathsep):
            if (Path(d) / tool).exists():
                (bin_dir / tool).symlink_to(Path(d) / tool)
                break
    env = {**os.environ, "PATH": str(bin_dir)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab",
            "run",
            "hash-storm",
            "false-success",
            "--collector",
            "all",
            "--packets",
            "off",
            "--no-archive",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout.decode()[-2000:] + done.stderr.decode()[-2000:]
    assert b"bpftrace unavailable" in done.stdout
    run = next((tmp_path / "out").iterdir())
    results = json.loads((run / "results.json").read_text())
    assert results["observers"]["bpftrace"]["available"] is False
    assert "bpftrace" in results["observers"]["bpftrace"]["reason"]
    for s in results["scenarios"]:
        for inv in s["invocations"]:
            assert "bpftrace" not in inv["observed"]
            assert "bpftrace" in inv["missing"]
        assert {f["met"] for f in s["findings"] if f["observer"] == "bpftrace"} <= {None}
    storm = next(s for s in results["scenarios"] if s["name"] == "hash-storm")
    assert storm["invocations"][1]["observed"]["strace"]["source_bytes_read"] == 134_217_728


def test_strace_that_never_attaches_fails_its_pass_and_no_client_runs_untraced(
    client: Path, tmp_path: Path, sandbox_ready: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lab.collectors.strace import StraceCollector
    from lab.host import procs
    from lab.sandbox.gate import Attacher

    status = StraceCollector.probe()
    require("strace", status.available, status.reason)

    def no_tracer(self: StraceCollector, ctx: object) -> Attacher:
        # a "tracer" that ends at once, never having attached: the gate stays shut
        return Attacher(
            start=lambda pid: procs.Background(["/bin/true"], purpose="a broken strace").start(),
            ready=lambda pid: False,
        )

    monkeypatch.setattr(StraceCollector, "attacher", no_tracer)
    outcome = _quiet_run(client, tmp_path, "baseline", "strace")
    scenario = outcome.result.scenarios[0]
    traced = next(p for p in scenario.passes if p.collector == "strace")
    assert traced.error is not None and "ended before it attached" in traced.error
    # the client behind the shut gate never ran: nothing reached the receiver in that pass
    records = (outcome.run_dir / "baseline" / "r1" / "strace").glob("*.jsonl")
    rx = [json.loads(line) for f in records if f.name == "receiver.jsonl" for line in f.open()]
    assert not [r for r in rx if r.get("event") == "connect"]
    assert scenario.error is None  # the untraced pass executed
    assert scenario.verdicts["C1"].observed == "pass"  # judged from the remaining evidence
    assert not client_processes(), "a client outlived the run"
