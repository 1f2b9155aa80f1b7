"""A verification command's writable directories are bounded (tests/assets/tasks/filler):
its check writes 300 MiB into $TMPDIR, $HOME and the Go build cache's layer; each write ends
in ENOSPC at the bound, the result records what each held, the report says so, the bounds
are in the evaluation's limits, and nothing of it is left mounted or on the host's disk.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from lab.sandbox.cgroup import Limits
from lab.workloads.verify import CACHE_MAX
from tests.conftest import ASSETS, require
from tests.integration.test_fixture_tasks import lab, results, run_dir_of

FILLER = ASSETS / "tasks" / "filler"


@pytest.fixture(scope="module", autouse=True)
def _needs(sandbox_ready: None) -> None:
    require("git", shutil.which("git") is not None, "git is not installed")
    require("go", shutil.which("go") is not None, "go is not installed (apt-get install golang-go)")


def _lab_mounts() -> list[str]:
    text = Path("/proc/self/mountinfo").read_text()
    return [line for line in text.split("\n") if " lab-layer " in line or "/lab-verify-" in line]


def _scratch() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("lab-task-")}


def test_a_check_that_fills_its_disk_meets_enospc_at_each_bound(tmp_path: Path) -> None:
    before_mounts, before_scratch = _lab_mounts(), _scratch()
    code, doc = lab(
        "evaluate",
        "--task",
        str(FILLER / "task.yaml"),
        "--patch",
        str(FILLER / "seeds" / "correct.patch"),
        "--out",
        str(tmp_path),
    )
    assert code == 0 and doc["status"] == "pass"
    data = results(doc)
    ev: dict[str, Any] = data["evaluation"]
    calibration = data["calibration"]
    assert (calibration["met"], calibration["total"]) == (2, 2)
    assert calibration["reused_from"] is None  # judged in this run (a fresh --out)
    assert ev["limits"]["disk_max"] == Limits().disk_max
    assert ev["limits"]["gocache_max_bytes"] == CACHE_MAX
    fill = ev["repetitions"][0]["commands"]["fill"]
    bounds = {"home": Limits().disk_max, "tmp": Limits().disk_max, "gocache": CACHE_MAX}
    assert fill["disk_full"] == ["gocache", "home", "tmp"]
    for name, bound in bounds.items():
        use = fill["disk"][name]
        assert use["bytes_max"] == bound and use["full"], (name, use)
        assert bound - 4096 <= use["bytes_used"] <= bound, (name, use)
    out = (run_dir_of(doc) / "repetitions" / "r1" / "commands" / "fill" / "stdout").read_text()
    assert out.count("exited 1: dd: error writing") == 3, out
    assert "No space left on device" in out
    # go vet ran through the overlay of the warm cache and wrote a little into its layer
    vet = ev["repetitions"][0]["commands"]["vet"]
    assert vet["exit_status"] == 0 and not vet["disk"]["gocache"]["full"]
    # the warming run's cache on the untouched fixture was never filled (value.txt is 1)
    baseline = ev["baseline"]["commands"]["fill"]
    assert baseline["disk_full"] == ["home", "tmp"] and baseline["exit_status"] == 1
    report = (run_dir_of(doc) / "report.md").read_text()
    assert "filled its bounded gocache, home, tmp (ENOSPC)" in report
    assert f"gocache_max_bytes {CACHE_MAX}" in report
    # nothing left: no mount of a verification command, no scratch directory of the run
    assert _lab_mounts() == before_mounts
    assert _scratch() <= before_scratch
    assert json.loads((run_dir_of(doc) / "results.json").read_text())["evaluation"]["limits"]
