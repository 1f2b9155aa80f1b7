"""Candidate evaluation end to end on the host (--local): each defective candidate is caught
on the clause it breaks, a correct alternative passes, a broken patch is a build result."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from lab import _cli
from lab.collectors.strace import StraceCollector
from tests.conftest import ASSETS, require

CANDIDATES = ASSETS / "candidates"
#: candidate -> clauses that must fail (all others must pass)
EXPECTED_FAILURES = {
    "udp-telemetry.patch": {"C3"},  # sendto() without connect() to 127.0.0.2
    "forked-egress.patch": {"C3"},  # a child process connects to 127.0.0.3
    # trusts a cache of the last size in /tmp, claims success: the changed-source condition
    # (new content, same size, cache kept across the pass's invocations) catches it
    "size-cache.patch": {"C1", "C6"},
    "gives-up-on-drop.patch": {"C4"},  # no retry after an interrupted transfer
    "optimistic-on-drop.patch": {"C4", "C6"},  # reports a dropped transfer as success
}


def run_dirs(out: Path) -> list[Path]:
    """The run directories under ``out`` (``.calibrations/``, where a passed instrument check
    is kept for the next evaluation, is not one)."""
    return sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))


def evaluate(tmp_path: Path, *args: str, timing_runs: int = 2) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "artifacts"
    argv = [
        "evaluate",
        *args,
        "--local",
        "--repetitions",
        "1",
        "--timing-runs",
        str(timing_runs),
        "--collector",
        "strace",
        "--packets",
        "off",
        "--out",
        str(out),
    ]
    code = _cli.main(argv)
    runs = run_dirs(out)
    assert len(runs) == 1
    results = json.loads((runs[0] / "results.json").read_text())
    assert (runs[0] / "evaluation.json").exists()
    assert (out / f"{runs[0].name}.tar.gz").exists()
    return code, results


@pytest.fixture(autouse=True)
def _needs(client: Path, sandbox_ready: None) -> None:
    # the size-cache candidate's cache lives in the sandbox's per-pass /tmp: nothing to clean
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    require("patch", shutil.which("patch") is not None, "patch is not installed")


@pytest.mark.parametrize("name", sorted(EXPECTED_FAILURES))
def test_defective_candidate_caught_on_its_clause(tmp_path: Path, name: str) -> None:
    code, results = evaluate(tmp_path, "--patch", str(CANDIDATES / name))
    evaluation = results["evaluation"]
    assert code == 1 and evaluation["status"] == "fail"
    assert evaluation["instrument_check"]["ok"] is True
    failed = {c for c, row in evaluation["clauses"].items() if row["pass"] < row["total"]}
    failing = {c for c, row in evaluation["clauses"].items() if row["fail"] > 0}
    assert failing == EXPECTED_FAILURES[name], evaluation["clauses"]
    assert failed >= failing
    assert len(evaluation["candidate"]["binary_sha256"]) == 64
    assert evaluation["timing"]["ratio"]["first_backup_wall"] is not None
    # two timing rounds are too few for an interval: none is made up
    assert set(evaluation["timing"]["ratio_interval"].values()) == {None}
    # the instrument floor was timed beside them, by a reference uploader that is named
    assert evaluation["timing"]["clients"]["floor"]["nonzero_exits"] == 0
    assert len(evaluation["timing"]["floor"]["binary_sha256"]) == 64


def test_correct_alternative_passes(tmp_path: Path) -> None:
    code, results = evaluate(tmp_path, "--source-dir", str(CANDIDATES / "alt-client"))
    evaluation = results["evaluation"]
    assert code == 0 and evaluation["status"] == "pass", evaluation.get("status_reason")
    # every repetition that exercised a clause passed it
    assert all(
        (row["pass"] + row["not-exercised"] == row["total"] and row["pass"] > 0)
        or (row["pass"] == 0 and row["not-exercised"] == row["total"])
        for row in evaluation["clauses"].values()
    )
    # no condition offers a mismatching payload: said beside the status, never a pass
    assert evaluation["clauses"]["C5"]["pass"] == 0
    assert "C5 not exercised by any condition" in evaluation["status_reason"]
    assert evaluation["client_contract"] == {
        "honoured": True,
        "violations": [],
        "violation_count": 0,
    }


def test_a_real_speed_up_passes_and_every_ratio_has_its_interval(tmp_path: Path) -> None:
    # mmap-speedup.patch: one mapping and one digest call, the payload sent from the mapping
    code, results = evaluate(
        tmp_path, "--patch", str(CANDIDATES / "mmap-speedup.patch"), timing_runs=3
    )
    evaluation = results["evaluation"]
    assert code == 0 and evaluation["status"] == "pass", evaluation.get("status_reason")
    timing = evaluation["timing"]
    assert set(timing["ratio_interval"]) == set(timing["ratio"])
    assert "first_backup_wall_above_floor" in timing["ratio"]
    assert "bootstrap" in timing["interval_method"]
    bars = [bar for bar in timing["ratio_interval"].values() if bar is not None]
    assert bars and all(low <= high for low, high in bars)


def test_patch_that_does_not_compile(tmp_path: Path) -> None:
    code, results = evaluate(tmp_path, "--patch", str(CANDIDATES / "does-not-compile.patch"))
    evaluation = results["evaluation"]
    assert code == 1 and evaluation["status"] == "build-failed"
    assert evaluation["candidate"]["build"]["exit_status"] != 0
    [run] = run_dirs(tmp_path / "artifacts")
    assert "timeout_ms" in (run / "candidate" / "build.err").read_text()


def test_evaluation_id_is_frozen_independently_of_the_candidate(tmp_path: Path) -> None:
    _, a = evaluate(tmp_path / "a", "--patch", str(CANDIDATES / "does-not-compile.patch"))
    _, b = evaluate(tmp_path / "b", "--patch", str(CANDIDATES / "does-not-compile.patch"))
    assert a["evaluation"]["evaluation_id"] == b["evaluation"]["evaluation_id"]


def test_a_hanging_candidate_costs_one_limit_per_condition(
    tmp_path: Path, hostile: dict[str, Path]
) -> None:
    """Default repetitions, timing runs, collectors and time limit: a candidate that claims
    success and then never exits is judged (C6 fails), not timed, in under three minutes."""
    started = time.monotonic()
    out = tmp_path / "artifacts"
    code = _cli.main(["evaluate", "--binary", str(hostile["hang"]), "--local", "--out", str(out)])
    elapsed = time.monotonic() - started
    [run] = run_dirs(out)
    evaluation = json.loads((run / "results.json").read_text())["evaluation"]
    assert code == 1 and evaluation["status"] == "fail"
    assert evaluation["clauses"]["C6"]["fail"] >= 1
    assert "timing" not in evaluation and "not timed" in evaluation["timing_skipped"]
    assert elapsed < 180, f"took {elapsed:.0f} s"
