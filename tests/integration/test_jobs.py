"""``lab run --all --collector none --packets off --jobs 2`` through the real lab: every
untraced pass may overlap another, and the run must still calibrate at 100 % (busy-spin's
wall and CPU floors, interrupted-transfer's drop, unexpected-egress's decoy included), list
its scenarios in the sequential order, record which passes overlapped, say so in the
report, and print one whole line per finished pass.

Run it under the shared sandbox's lock: ``flock /tmp/lab-sandbox.lock pytest ...``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab.workloads.backup.scenario import select
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("sandbox_ready")


def test_untraced_passes_overlap_and_calibrate(client: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "lab", "run", "--all", "--collector", "none"]
    argv += ["--packets", "off", "--jobs", "2", "--no-archive", "--out", str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())

    names = [s.name for s in select(ROOT / "scenarios", [], True)]
    assert [s["name"] for s in results["scenarios"]] == names  # the sequential order
    assert results["calibration"]["not_met"] == 0
    assert all(s["error"] is None for s in results["scenarios"])
    record = results["concurrency"]
    assert record["jobs"] == record["jobs_requested"] == 2
    assert record["overlapping"] == ["none", "strace", "bpftrace", "perf"]
    assert record["why_sequential"] is None
    flags = [p["concurrent"] for s in results["scenarios"] for p in s["passes"]]
    assert record["concurrent_passes"] == sum(flags) >= 2

    report = (run_dir / "report.md").read_text()
    assert "Passes at once:" in report and "ran beside another pass" in report
    # one whole line per finished pass, numbered 1..8 in the order they finished
    text = done.stdout + done.stderr
    finished = re.findall(r"^\[(\d+)/(\d+)\] (\S+) \(repetition 1\): pass none done in", text, re.M)
    assert [int(n) for n, _, _ in finished] == list(range(1, len(names) + 1))
    assert sorted(name for _, _, name in finished) == sorted(names)
