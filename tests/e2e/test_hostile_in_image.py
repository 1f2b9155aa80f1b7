"""Hostile clients judged by ``lab evaluate`` in the lab image, as a new user would run it
(``invoke lab.evaluate --binary``): the disk filler, the /proc walker, the timing-round
detector, the forbidden calls, a 3,000-level tree and a copy of itself exec'd, of
tests/assets/hostile/. Each evaluation finishes with a verified archive, each
client is judged on its clause (its box's disk is bounded, it sees no process of the host,
it cannot tell a timing round from a judged pass), and nothing of it is left on the host:
no container, no process. Needs Docker and root (the image is built by the nox ``e2e``
session first)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from lab.sandbox.cgroup import Limits
from tests.e2e.test_lab_run import ARTIFACTS, invoke, newest, verify_everywhere


def _evaluate(client: Path, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    before = set(ARTIFACTS.glob("*.tar.gz"))
    done = invoke(
        "lab.evaluate", "--binary", str(client), "--repetitions", "1", "--timing-runs", "2",
        timeout=3000,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-4000:] + done.stderr[-4000:]
    archive = newest("eval", before)
    results = verify_everywhere(archive, tmp_path)
    assert results["environment"]["in_container"] is True
    _nothing_left(client)
    return results, tmp_path / archive.name.removesuffix(".tar.gz")


def _nothing_left(client: Path) -> None:
    """No container of the lab image and no process of the client outlives the evaluation."""
    image = os.environ.get("LAB_IMAGE") or "execution-evidence-lab:local"
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"ancestor={image}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert left == [], f"containers of {image} left: {left}"
    running = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert client.name not in running, running


def _invocations(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        inv
        for scenario in results["scenarios"]
        for p in scenario["passes"]
        for inv in p["invocations"]
    ]


def _events(run_dir: Path, name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for stdout in sorted(run_dir.rglob("client.stdout")):
        for line in stdout.read_text(errors="replace").split("\n"):
            if line.startswith("{") and f'"event": "{name}"' in line:
                found.append(json.loads(line))
    return found


def test_the_disk_filler_meets_its_bound_in_the_image(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    results, run_dir = _evaluate(hostile["disk-filler"], tmp_path)
    filled = _events(run_dir, "filled")
    assert filled, "the filler never reported"
    bound = Limits().disk_max
    assert all(0 <= int(e["bytes"]) <= bound for e in filled), filled
    assert any(int(e["bytes"]) > 0 and e["errno"] == 28 for e in filled), filled  # ENOSPC
    disks = [inv["sandbox"]["disk"] for inv in _invocations(results) if inv["sandbox"].get("disk")]
    assert all(d["tmp"]["bytes_max"] == bound for d in disks)
    # the lab's own record of the filler's box (the seeded client of the instrument check
    # fills nothing): full at its bound
    assert any(d["tmp"]["full"] and d["home"]["full"] for d in disks), disks
    assert results["evaluation"]["limits"]["disk_max"] == bound
    assert results["evaluation"]["clauses"]["C1"]["fail"] == 0  # its backups were correct


def test_the_proc_walker_sees_nothing_of_the_host_in_the_image(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    results, run_dir = _evaluate(hostile["proc-walker"], tmp_path)
    processes = _events(run_dir, "process")
    assert processes, "the walker never reported"
    for event in processes:
        cmdline = str(event["cmdline"])
        for word in ("python", "bwrap", "docker", "/lab/", "strace", "tcpdump"):
            assert word not in cmdline, cmdline
    assert results["evaluation"]["clauses"]["C1"]["fail"] == 0


def test_the_timing_round_detector_finds_none_in_the_image(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    results, _ = _evaluate(hostile["timing-cheat"], tmp_path)
    timing = results["evaluation"]["timing"]
    candidate = timing["clients"]["candidate"]
    # it could not tell a round from a judged pass: it backed up in every round, each
    # checked and counted, so its figure is a real one (never a fake speed-up)
    assert candidate.get("failed_rounds", 0) == 0, candidate
    assert timing["ratio"]["first_backup_wall"] is not None
    assert results["evaluation"]["clauses"]["C1"]["fail"] == 0


def test_forbidden_calls_are_refused_and_observed_in_the_image(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    results, _ = _evaluate(hostile["forbidden-calls"], tmp_path)
    refused = [
        inv["sandbox"]["refused"]
        for inv in _invocations(results)
        if inv["sandbox"].get("refused") and inv["sandbox"]["refused"]["calls"]
    ]
    # the kernel's audit log, read from /dev/kmsg in the container, saw the refusals
    assert refused, "no refusal was observed in the image"
    assert all(r["observed"] for r in refused)
    assert {"keyctl", "ptrace"} & set().union(*(r["calls"] for r in refused))
    contract = results["evaluation"]["client_contract"]
    assert not contract["honoured"]
    assert any("the sandbox refuses" in v["problem"] for v in contract["violations"])
    assert results["evaluation"]["clauses"]["C1"]["fail"] == 0  # its backups were correct


def test_a_deep_tree_left_in_the_box_is_removed_in_the_image(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    results, run_dir = _evaluate(hostile["deep-tree"], tmp_path)
    made = _events(run_dir, "deep-tree")
    # 3,000 nested directories in its box (a later invocation of the same pass finds its
    # HOME's tree made and adds none): removed, the lab finished with a verified archive
    # (in _evaluate) and its backups judged on their clauses
    assert any(int(str(e["detail"])) == 3000 for e in made), made
    assert results["evaluation"]["clauses"]["C1"]["fail"] == 0


def test_a_copy_of_the_client_is_not_a_zero_in_the_image(
    hostile: dict[str, Path], tmp_path: Path
) -> None:
    results, run_dir = _evaluate(hostile["exec-copy"], tmp_path)
    assert _events(run_dir, "hashed"), "the copy never hashed"
    traced = [
        inv["observed"]["bpftrace"]
        for inv in _invocations(results)
        if (inv.get("observed") or {}).get("bpftrace")
    ]
    assert traced, "no bpftrace pass in the evaluation"
    # the copy it exec'd hashed where no uprobe was attached: bpftrace saw the exec, names
    # the blind spot, and the count is not observed, never 0 (the instrument check's seeded
    # client, which execs nothing, keeps its counts)
    blind = [
        bpf
        for bpf in traced
        if any("not attached to" in spot for spot in bpf.get("blind_spots", []))
    ]
    assert blind, traced
    assert all(bpf.get("hash_calls") is None for bpf in blind), blind
