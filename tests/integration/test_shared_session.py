"""One bpftrace session for every bpftrace pass of a sandboxed run (``lab.run.phases``),
through the real lab: it must attribute each event to the one invocation that caused it
(never to another pass sharing the session), keep each invocation's verbatim split, and
never read silence where its uprobes could not see: a pass whose box holds another inode
than the one the shared uprobes attached to gets a session of its own.

Run it under the shared sandbox's lock: ``flock /tmp/lab-sandbox.lock pytest ...``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lab.collectors.bpftrace import BpftraceSession
from tests.conftest import ROOT, require

pytestmark = pytest.mark.usefixtures("sandbox_ready")


@pytest.fixture(scope="module")
def bpftrace_ready() -> None:
    status = BpftraceSession.probe()
    require("bpftrace", status.available, status.reason)


def _run(out: Path, *, prelude: str = "") -> dict[str, Any]:
    """``lab run hash-storm baseline --repetitions 2 --collector bpftrace`` in a process of
    its own, after ``prelude`` (a patch the test applies to the lab)."""
    args = ["run", "hash-storm", "baseline", "--repetitions", "2", "--collector", "bpftrace"]
    args += ["--packets", "off", "--no-archive", "--out", str(out)]
    code = f"import sys\n{prelude}\nfrom lab._cli import main\nsys.exit(main({args!r}))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    results: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    results["_dir"] = str(run_dir)
    return results


def _bpftrace_passes(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (s["name"], p)
        for s in results["scenarios"]
        for p in s["passes"]
        if p["collector"] == "bpftrace"
    ]


def _sessions(run_dir: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "commands.jsonl").read_text().splitlines()]
    return [r for r in rows if r["purpose"].startswith("bpftrace session")]


def test_one_session_serves_every_pass_and_attributes_each_event(
    bpftrace_ready: None, client: Path, tmp_path: Path
) -> None:
    results = _run(tmp_path / "out")
    run_dir = Path(results["_dir"])
    assert results["calibration"]["not_met"] == 0
    passes = _bpftrace_passes(results)
    assert len(passes) == 4
    [session] = _sessions(run_dir)
    assert "4 passes (8 invocations)" in session["purpose"]
    records = [p["session"] for _, p in passes]
    assert all(r == records[0] for r in records)
    assert records[0]["passes"] == 4 and records[0]["invocations"] == 8
    assert records[0]["attach_s"] > 0 and records[0]["stop_s"] > 0
    assert (run_dir / records[0]["directory"] / "bpftrace.txt").is_file()

    seen: set[int] = set()
    for name, p in passes:
        assert p["error"] is None
        for inv in p["invocations"]:
            observed = inv["observed"]["bpftrace"]
            # hash-storm hashes 256 times per invocation, baseline once: an event counted
            # in another pass's cgroup would show here
            assert observed["hash_calls"] == (256 if name == "hash-storm" else 1)
            assert observed["events_complete"] is True
            cgroup = observed["cgroup_id"]
            assert cgroup == inv["sandbox"]["cgroup_id"] and cgroup not in seen
            seen.add(cgroup)
            [split] = [a for a in inv["artifacts"]["bpftrace"] if a.endswith("/bpftrace.txt")
                       and not a.startswith("sessions/")]  # fmt: skip
            text = (run_dir / split).read_text()
            assert set(re.findall(r" cg=(\d+) ", text)) == {str(cgroup)}
            assert "lab: end of trace" in text


def test_a_pass_with_another_inode_gets_a_session_of_its_own(
    bpftrace_ready: None, client: Path, tmp_path: Path
) -> None:
    # every box gets a copy instead of the shared inode: the shared session's uprobes would
    # see none of the client's functions, so no pass may take its counts
    prelude = (
        "import os, lab.sandbox.cell as cell\n"
        "def refuse(*a, **k):\n"
        "    raise OSError(18, 'Invalid cross-device link')\n"
        "cell.os.link = refuse\n"
    )
    results = _run(tmp_path / "out", prelude=prelude)
    run_dir = Path(results["_dir"])
    assert results["calibration"]["not_met"] == 0
    passes = _bpftrace_passes(results)
    assert all(p["session"] is None and p["error"] is None for _, p in passes)
    # the shared one (which served no pass) and one per pass
    assert len(_sessions(run_dir)) == 1 + len(passes)
    for name, p in passes:
        for inv in p["invocations"]:
            assert inv["observed"]["bpftrace"]["hash_calls"] == (256 if name == "hash-storm" else 1)
