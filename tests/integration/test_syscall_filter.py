"""The sandbox's system-call filter (lab/sandbox/seccomp.py) against a hostile client that
tries each call a backup client never needs (tests/assets/hostile: forbidden-calls): every
one is refused with EPERM, the kernel's audit log (read from /dev/kmsg, outside the client)
records each refusal, results.json and the report show them, and the backup itself is still
judged on its clauses. The tracers run outside the filter: strace still follows the client
and sees the same refusals from its side.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.collectors.strace import StraceCollector
from lab.sandbox import seccomp
from tests.conftest import require
from tests.integration.test_containment import events, only, run_hostile, verdicts

pytestmark = pytest.mark.usefixtures("sandbox_ready")

#: what the hostile client tries (tests/assets/hostile/hostile.c: forbidden_calls)
TRIED = (
    "bpf", "clone", "keyctl", "mount", "perf_event_open", "ptrace", "unshare", "userfaultfd",
)  # fmt: skip


def _kernel_log_readable() -> None:
    watch = seccomp.KmsgWatch.open()
    found = watch.collect(uid=-1, names={})
    require("sandbox", found.observed, found.reason)


def test_each_forbidden_call_is_refused_and_recorded_by_the_kernel(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    _kernel_log_readable()
    outcome = run_hostile(hostile["forbidden-calls"], tmp_path / "out")
    said = [str(e["detail"]) for e in events(outcome) if e.get("event") == "forbidden-call"]
    assert len(said) == len(TRIED), said
    for line in said:  # the client's own account, for the record: every one refused
        assert "returned -1 (Operation not permitted)" in line, line
    compat = [str(e["detail"]) for e in events(outcome) if e.get("event") == "forbidden-call-32"]
    assert compat == ["mount (int 0x80) returned -1"], compat  # -EPERM, refused there too
    inv = only(outcome).passes[0].invocations[0]
    assert inv.sandbox is not None and inv.sandbox.refused is not None
    refused = inv.sandbox.refused
    assert refused["observed"] and refused["observer"] == seccomp.OBSERVER
    # the kernel's rate limit may drop records (then it says how many): a lower bound
    seen = set(refused["calls"])
    if refused["suppressed"] == 0:
        assert seen == set(TRIED), refused
    assert seen and seen <= set(TRIED), refused
    assert all("type=1326" in line for line in refused["raw"])
    if refused["suppressed"] == 0:  # both mounts: the 64-bit one and int 0x80's
        assert refused["calls"]["mount"] == 2, refused
        assert any("arch=40000003 syscall=21 " in line for line in refused["raw"]), refused
    # the backup itself was correct: judged on its clauses, not failed for the attempts
    assert verdicts(outcome)["C1"] == "pass"
    results = json.loads((outcome.run_dir / "results.json").read_text())
    row = results["scenarios"][0]["passes"][0]["invocations"][0]["sandbox"]["refused"]
    assert row["total"] >= 1 and row["calls"] == refused["calls"]
    report = (outcome.run_dir / "report.md").read_text()
    assert "system calls refused" in report
    assert all(f"{name} x{count}" in report for name, count in refused["calls"].items())


def test_the_honest_client_is_refused_nothing(hostile: dict[str, Path], tmp_path: Path) -> None:
    _kernel_log_readable()
    outcome = run_hostile(hostile["honest"], tmp_path / "out")
    inv = only(outcome).passes[0].invocations[0]
    assert inv.sandbox is not None and inv.sandbox.refused is not None
    assert inv.sandbox.refused["observed"] and inv.sandbox.refused["calls"] == {}
    assert verdicts(outcome)["C1"] == "pass"


def test_strace_runs_outside_the_filter_and_sees_the_refusals(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    outcome = run_hostile(hostile["forbidden-calls"], tmp_path / "out", collector="strace")
    [traced] = [p for p in only(outcome).passes if p.collector == "strace"]
    inv = traced.invocations[0]
    assert inv.observed.strace is not None, inv.missing
    assert inv.observed.strace.connects >= 1  # it followed the client to its backup
    raw = outcome.run_dir / "first-backup" / "r1" / "strace" / "inv1" / "strace.txt"
    text = raw.read_text(errors="replace")
    for name in ("keyctl", "bpf", "userfaultfd"):
        assert f"{name}(" in text and "EPERM" in text, name
