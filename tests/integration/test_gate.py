"""The jail's gate (lab.sandbox.gate): a tracer attached there sees the client from its own
execve on and nothing of the jail before the gate; a tracer that never attaches leaves the
client unrun, with one sentence saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.collectors.strace import attached
from lab.collectors.strace_parse import client_calls, iter_syscalls
from lab.host import procs
from lab.sandbox import Sandbox
from lab.sandbox import supervise as supervising
from lab.sandbox.gate import Attacher
from lab.sandbox.jail import GATED_EXECS, JAIL_EXECS
from lab.sandbox.seccomp import INSIDE as FILTER_INSIDE

pytestmark = pytest.mark.usefixtures("sandbox_ready")

SLEEP = Path("/bin/sleep")


def strace_at(trace: Path) -> Attacher:
    messages = trace.with_suffix(".stderr.txt")

    def start(pid: int) -> procs.Background:
        argv = ["strace", "-f", "--pidns-translation", "-ttt", "-T", "-yy", "-o", str(trace)]
        argv += ["-p", str(pid)]
        return procs.Background(
            argv, purpose="strace at the gate", tool="strace", stderr=messages
        ).start()

    return Attacher(start=start, ready=lambda pid: attached(messages, pid))


def never_ready(argv: list[str], purpose: str) -> Attacher:
    """A "tracer" that never says it attached (it ends at once, or idles)."""
    return Attacher(
        start=lambda pid: procs.Background(argv, purpose=purpose).start(),
        ready=lambda pid: False,
    )


def test_a_tracer_attached_at_the_gate_sees_the_client_and_not_the_jail(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    trace = tmp_path / "strace.txt"
    with sandbox.pass_cell("gate-strace", client=SLEEP, invocations=1) as cell:
        outcome = cell.run(
            1,
            [str(cell.client), "0.05"],
            wrap=lambda argv: argv,
            timeout_s=30,
            stdout=tmp_path / "stdout",
            stderr=tmp_path / "stderr",
            purpose="sleep, traced from the gate",
            attach=strace_at(trace),
        )
        client = str(cell.client)
    assert outcome.exit_status == 0 and outcome.attach_error is None
    assert outcome.wrapper is not None and outcome.wrapper.argv[0] == "strace"
    calls, _ = iter_syscalls(trace.read_text())
    pid = outcome.main_pid
    assert pid is not None and calls[0].pid == pid  # it begins inside the main process
    execs = [c.args.split(",")[0] for c in calls if c.name == "execve" and c.ret == 0]
    # prlimit, then the client: nothing of the jail's earlier steps (shell, capsh, filter)
    assert len(execs) == GATED_EXECS + 1 and execs[-1] == f'"{client}"'
    assert not any(FILTER_INSIDE in e or "capsh" in e or "bwrap" in e for e in execs)
    kept, processes = client_calls(calls, pid, JAIL_EXECS, attached_execs=GATED_EXECS)
    assert kept[0].name == "execve" and kept[0].args.startswith(f'"{client}"')
    assert processes == 1 and kept[-1].name == "exit_group"


def touch_behind_the_gate(
    sandbox: Sandbox, tmp_path: Path, tag: str, attach: Attacher
) -> tuple[supervising.Outcome, bool]:
    """A client that creates a file, run with ``attach`` at its gate: the outcome, and
    whether the file exists (the client ran)."""
    with sandbox.pass_cell(tag, client=Path("/bin/touch"), invocations=1) as cell:
        outcome = cell.run(
            1,
            [str(cell.client), str(cell.tmp() / "ran")],
            wrap=lambda argv: argv,
            timeout_s=30,
            stdout=tmp_path / "stdout",
            stderr=tmp_path / "stderr",
            purpose="a client that must not run",
            attach=attach,
        )
        return outcome, (cell.tmp() / "ran").exists()


def test_a_tracer_that_ends_before_attaching_leaves_the_client_unrun(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    broken = never_ready(["/bin/true"], "a tracer that fails")
    outcome, ran = touch_behind_the_gate(sandbox, tmp_path, "gate-broken", broken)
    assert not ran
    assert outcome.attach_error is not None and "ended before it attached" in outcome.attach_error
    assert outcome.sandbox_error is None  # the sandbox did its part; the tracer did not
    assert outcome.exit_status == 125
    assert "did not open the gate" in (tmp_path / "stderr").read_text()


def test_a_tracer_that_never_attaches_times_out_and_the_client_stays_unrun(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervising, "ATTACH_TIMEOUT_S", 0.5)

    idle = never_ready(["/bin/sleep", "30"], "a tracer that idles")
    outcome, ran = touch_behind_the_gate(sandbox, tmp_path, "gate-idle", idle)
    assert not ran
    assert outcome.attach_error is not None and "did not attach in time" in outcome.attach_error
    assert outcome.exit_status == 125


@pytest.mark.parametrize(
    ("gate", "answer", "why"),
    [
        ("--gate=x", None, "--gate takes a file descriptor"),
        ("--gate={fd}", b"", "did not open the gate"),  # the lab's end closed
        ("--gate={fd}", b"X", "did not open the gate"),  # anything but "G"
    ],
)
def test_the_filter_runs_nothing_unless_its_gate_says_go(
    gate: str, answer: bytes | None, why: str
) -> None:
    import socket
    import subprocess

    from lab.sandbox.seccomp import helper

    lab_end, jail_end = socket.socketpair()
    with lab_end, jail_end:
        argv = [str(helper()), gate.format(fd=jail_end.fileno()), "/bin/echo", "ran"]
        child = subprocess.Popen(
            argv,
            pass_fds=[jail_end.fileno()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        jail_end.close()
        if answer is not None:
            assert lab_end.recv(1) == b"R"
            lab_end.sendall(answer)
            lab_end.close()
        out, err = child.communicate(timeout=10)
    assert child.returncode == 125 and out == b""
    assert why in err.decode()
