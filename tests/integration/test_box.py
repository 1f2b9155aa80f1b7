"""Round-4 hostile clients (tests/assets/hostile/): the box's disk, the host's processes, a
copy of the client exec'd from $TMPDIR, and odd line separators in a claim. Each is run
through the real lab and judged on its clause; the lab finishes, writes its results and
leaves nothing on the host (every pass's scratch directory is made under a directory of the
test's own, which must be empty afterwards, and no tmpfs of the lab stays mounted there).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from lab.collectors.bpftrace import BpftraceSession
from lab.sandbox.boxfs import mounts_under
from lab.sandbox.cgroup import Limits
from tests.conftest import require
from tests.integration.test_containment import events, only, run_hostile, verdicts

pytestmark = pytest.mark.usefixtures("sandbox_ready")


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the lab's temporary directories go during the test (checked empty after)."""
    where = tmp_path / "scratch"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    yield where
    assert mounts_under(where) == [], "a bounded directory stayed mounted"
    assert sorted(p.name for p in where.iterdir()) == [], "a pass left files on the host"


def test_a_deep_tree_left_in_the_box_is_removed_and_the_run_finishes(
    hostile: dict[str, Path], tmp_path: Path, scratch: Path
) -> None:
    outcome = run_hostile(hostile["deep-tree"], tmp_path / "out")
    made = [e for e in events(outcome) if e.get("event") == "deep-tree"]
    assert made and int(str(made[0]["detail"])) == 3000, made
    assert (outcome.run_dir / "results.json").is_file()
    assert verdicts(outcome)["C1"] == "pass"


def test_a_deep_tree_is_removed_without_the_sandbox_too(
    hostile: dict[str, Path], tmp_path: Path, scratch: Path
) -> None:
    # --sandbox off: HOME is the pass's host directory, removed by rm, not by Python
    outcome = run_hostile(hostile["deep-tree"], tmp_path / "out", sandbox="off", packets="off")
    made = [e for e in events(outcome) if e.get("event") == "deep-tree"]
    assert made and int(str(made[0]["detail"])) == 3000, made
    assert (outcome.run_dir / "results.json").is_file()


def test_filling_home_and_tmp_meets_the_bound_not_the_host_disk(
    hostile: dict[str, Path], tmp_path: Path, scratch: Path
) -> None:
    outcome = run_hostile(hostile["disk-filler"], tmp_path / "out", timeout_s=60.0)
    bound = Limits().disk_max
    filled = [e for e in events(outcome) if e.get("event") == "filled"]
    assert len(filled) == 2, filled
    for event in filled:
        assert 0 < int(str(event["bytes"])) <= bound, event
        assert event["errno"] == 28, event  # ENOSPC
    inv = only(outcome).passes[0].invocations[0]
    assert inv.sandbox is not None
    for name in ("home", "tmp"):
        disk = inv.sandbox.disk[name]
        assert disk is not None and disk["full"] and disk["bytes_max"] == bound, disk
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert results["scenarios"][0]["passes"][0]["invocations"][0]["sandbox"]["disk"]["tmp"]


def test_the_client_sees_only_its_own_processes(
    hostile: dict[str, Path], tmp_path: Path, scratch: Path
) -> None:
    out = tmp_path / "out"
    outcome = run_hostile(hostile["proc-walker"], out)
    seen = events(outcome)
    processes = [e for e in seen if e.get("event") == "process"]
    assert processes, seen
    # the sandbox's own init and the client: nothing of the host
    assert len(processes) <= 3, processes
    for event in processes:
        cmdline = str(event["cmdline"])
        assert str(out) not in cmdline and "python" not in cmdline, cmdline
        assert "bwrap" not in cmdline, cmdline


def test_lines_end_at_newline_only(hostile: dict[str, Path], tmp_path: Path, scratch: Path) -> None:
    outcome = run_hostile(hostile["odd-separators"], tmp_path / "out")
    inv = only(outcome).passes[0].invocations[0]
    # the line with a raw form feed is one unparsed line (str.splitlines made it two)
    assert inv.claim.unparsed_lines == 1
    assert inv.claim.completion is not None
    assert inv.claim.completion["note"] == "a\u2028b\u0085c"
    assert verdicts(outcome)["C6"] == "pass"


def test_a_copy_of_the_client_hashing_unseen_is_not_a_zero(
    hostile: dict[str, Path], tmp_path: Path, scratch: Path
) -> None:
    status = BpftraceSession.probe()
    require("bpftrace", status.available, status.reason)
    outcome = run_hostile(hostile["exec-copy"], tmp_path / "out", collector="bpftrace")
    [traced] = [p for p in only(outcome).passes if p.collector == "bpftrace"]
    [stdout] = outcome.run_dir.glob("first-backup/r1/bpftrace/inv1/client.stdout")
    assert b'"hashed"' in stdout.read_bytes()
    bpf = traced.invocations[0].observed.bpftrace
    assert bpf is not None
    # 256 hash_file calls ran in the copy, where no uprobe was attached: not observed
    assert bpf.hash_calls is None, bpf.to_dict()
    assert any(
        "not attached to" in spot and "/tmp/client-copy" in spot for spot in bpf.blind_spots
    ), bpf.blind_spots
    # the syscall figures still are observed (they follow the cgroup, not the file)
    assert bpf.read_bytes is not None and bpf.read_bytes > 0
