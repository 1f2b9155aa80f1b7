"""lab.host.procs: the one process wrapper (accepted codes, time-outs that kill the whole
group, captured output, bounded stderr, the masked commands.jsonl record, stop_all)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.errors import ToolMissingError
from lab.host import procs
from lab.host.procs import Background, CommandFailed, CommandLog, run


@pytest.fixture(autouse=True)
def _nothing_left_running() -> Iterator[None]:
    yield
    assert procs.live_processes() == {}, "a test left a process group registered"


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (reaped, or a zombie waiting for its new parent)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        if "\nState:\tZ" in state:
            return True
        time.sleep(0.05)
    return False


def test_accepted_codes(tmp_path: Path) -> None:
    argv = ["sh", "-c", "echo oops >&2; exit 3"]
    done = run(argv, purpose="exit 3", accept=(0, 3), stderr=tmp_path / "err")
    assert done.exit_status == 3 and not done.timed_out and done.killed_by_signal is None
    assert run(argv, purpose="any status", accept=None).exit_status == 3
    with pytest.raises(CommandFailed) as failed:
        run(argv, purpose="exit 3", stderr=tmp_path / "err")
    assert str(failed.value) == "sh (exit 3) exited with status 3: oops"
    assert failed.value.completed.exit_status == 3


def test_a_signal_is_named(tmp_path: Path) -> None:
    with pytest.raises(CommandFailed, match="was killed by signal 15"):
        run(["sh", "-c", "kill -TERM $$"], purpose="killed")
    done = run(["sh", "-c", "kill -TERM $$"], purpose="killed", accept=None)
    assert done.exit_status is None and done.killed_by_signal == signal.SIGTERM


def test_time_out_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    started = time.monotonic()
    done = run(["sh", "-c", script], purpose="hang", timeout=0.5, accept=None)
    assert done.timed_out and time.monotonic() - started < 10
    assert done.killed_by_signal in (signal.SIGTERM, signal.SIGKILL)
    assert _gone(int(pidfile.read_text())), "the background child outlived the time-out"
    with pytest.raises(CommandFailed, match=r"did not finish within 0\.3 s"):
        run(["sleep", "60"], purpose="hang", timeout=0.3)


def test_capture_with_and_without_a_file(tmp_path: Path) -> None:
    done = run(["printf", "hello"], purpose="capture", capture=True)
    assert done.output == b"hello" and done.stdout_path is None  # the scratch file is gone
    kept = tmp_path / "out.txt"
    done = run(["printf", "kept"], purpose="capture", capture=True, stdout=kept)
    assert done.output == b"kept" and kept.read_bytes() == b"kept"
    assert done.stdout_path == str(kept)
    assert run(["true"], purpose="no capture").output is None


def test_usage_and_cpu_are_recorded() -> None:
    done = run(["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], purpose="busy")
    assert done.cpu_s is not None and done.cpu_s > 0
    assert done.max_rss_kib is not None and done.max_rss_kib > 0
    assert done.duration_s > 0 and done.started_at <= time.time()


def test_stderr_excerpt_is_bounded(tmp_path: Path) -> None:
    err = tmp_path / "err"
    done = run(
        ["sh", "-c", "printf 'x%.0s' $(seq 1000) >&2; printf END >&2"],
        purpose="noisy",
        stderr=err,
    )
    excerpt = done.stderr_excerpt()
    assert excerpt.startswith("…") and excerpt.endswith("END")
    assert len(excerpt) == procs.STDERR_EXCERPT + 1
    assert run(["true"], purpose="quiet").stderr_excerpt() == ""


def test_command_log_masks_the_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    log = CommandLog(run_dir / "commands.jsonl", root=run_dir)
    out = run_dir / "inv1" / "client.stdout"
    run(
        ["sh", "-c", "true", f"{run_dir}/x", f"in {run_dir}"],
        purpose="masked",
        log=log,
        stdout=out,
        capture=True,
    )
    (row,) = [json.loads(line) for line in (run_dir / "commands.jsonl").read_text().splitlines()]
    # an argument that is a path under the run directory is masked (a prefix match only)
    assert row["argv"] == ["sh", "-c", "true", "$RUN/x", f"in {run_dir}"]
    assert row["stdout_path"] == "$RUN/inv1/client.stdout"
    assert row["stderr_path"] is None and "output" not in row
    assert row["purpose"] == "masked" and row["exit_status"] == 0
    assert str(tmp_path) not in json.dumps({k: v for k, v in row.items() if k != "argv"})
    assert log.mask("/elsewhere/file") == "/elsewhere/file"
    assert CommandLog(tmp_path / "c.jsonl").mask(str(run_dir)) == str(run_dir)


def test_missing_tools_name_their_package(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError, match="could not be started"):
        run([str(tmp_path / "no-such-program")], purpose="missing")
    with pytest.raises(ToolMissingError, match="install the Debian package 'no-such-tool'"):
        run(["no-such-tool"], purpose="missing", tool="no-such-tool")
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(ToolMissingError, match="is not executable"):
        run([str(script)], purpose="not executable")


def test_background_stops_with_its_signal(tmp_path: Path) -> None:
    with Background(["sleep", "60"], purpose="helper", grace_s=2.0) as helper:
        assert helper.alive()
        assert helper.proc is not None and helper.proc.pid in procs.live_processes()
    assert helper.result is not None and helper.result.killed_by_signal == signal.SIGINT
    assert not helper.alive() and helper.stop() is helper.result


def test_stop_all_stops_every_group_the_lab_started() -> None:
    helper = Background(["sleep", "60"], purpose="forgotten helper")
    helper.__enter__()
    assert helper.proc is not None
    pid = helper.proc.pid
    try:
        assert procs.stop_all(grace_s=0.2) == ["forgotten helper"]
        assert _gone(pid)
    finally:
        done = helper.stop()  # reaps it and unregisters the group
    assert done.killed_by_signal == signal.SIGTERM


def test_stopping_everything_on_an_error() -> None:
    helper = Background(["sleep", "60"], purpose="left behind")
    with pytest.raises(RuntimeError), procs.stopping_everything():
        helper.__enter__()
        raise RuntimeError("boom")
    assert helper.proc is not None and _gone(helper.proc.pid)
    helper.stop()


def test_environment_and_working_directory(tmp_path: Path) -> None:
    done = run(
        ["sh", "-c", "echo $LAB_TEST_VALUE; pwd"],
        purpose="env",
        env={**os.environ, "LAB_TEST_VALUE": "seen"},
        cwd=tmp_path,
        capture=True,
    )
    assert (done.output or b"").decode().split() == ["seen", str(tmp_path)]
