"""Fixture tasks end to end on the host (--local), with the test-only tasks of
tests/assets/tasks/ (``shell``: no toolchain, fast; ``adder``: Go, go test -race -json and
go vet with the run's warm build cache): the untouched fixture must fail, the seeds must
break what they name, a candidate is judged by clause in the sandbox, a workload's oracle
decides its clauses (a failing oracle: not-observed), a campaign keeps every patch and
judges a timed-out repetition too, and ``--escalate-cmd`` hands a failed repetition to a
second agent with the signed evidence package.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab import _cli, workloads
from lab.evidence.keys import PublicKey
from lab.evidence.signing import verify_detached
from lab.evidence.verify import verify_archive
from lab.schemas import validate_results
from tests.conftest import ASSETS, require

SHELL = ASSETS / "tasks" / "shell"
ADDER = ASSETS / "tasks" / "adder"


@pytest.fixture(scope="module", autouse=True)
def _needs(sandbox_ready: None) -> None:
    require("git", shutil.which("git") is not None, "git is not installed")


def lab(*args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    stdout = io.StringIO()
    here = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(stdout):
            code = _cli.main([*args, "--local", "--json"])
    finally:
        os.chdir(here)
    text = stdout.getvalue()
    return code, json.loads(text) if text.strip() else {}


def run_dir_of(document: dict[str, Any]) -> Path:
    return Path(document["archive"]).with_suffix("").with_suffix("")


def results(document: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir_of(document) / "results.json").read_text())
    validate_results(data)
    return data


def copy_task(tmp: Path, change: Mapping[str, Any], expected: str | None = None) -> Path:
    dest = tmp / "task"
    shutil.copytree(SHELL, dest)
    data = yaml.safe_load((dest / "task.yaml").read_text())
    data.update(change)
    (dest / "task.yaml").write_text(yaml.safe_dump(data))
    if expected is not None:
        (dest / "seeds" / "expected.yaml").write_text(expected)
    return dest / "task.yaml"


def test_a_correct_patch_meets_the_task(tmp_path: Path) -> None:
    code, doc = lab(
        "evaluate",
        "--task",
        str(SHELL / "task.yaml"),
        "--patch",
        str(SHELL / "seeds" / "correct.patch"),
        "--out",
        str(tmp_path),
    )
    assert code == 0 and doc["status"] == "pass"
    data = results(doc)
    ev = data["evaluation"]
    assert ev["kind"] == "task" and ev["clauses"]["T1"]["pass"] == 1
    assert (data["calibration"]["met"], data["calibration"]["total"]) == (3, 3)
    assert data["calibration"]["reused_from"] is None
    assert ev["calibration"]["seeds"]["three"]["broken"] == ["T1"]
    # the JUnit report was parsed per test; lint's stdout was not kept (keep: [stderr])
    rep = ev["repetitions"][0]["commands"]
    assert rep["check"]["report"]["tests"] == {"shell.value": "pass"}
    assert rep["lint"]["kept"] == ["stderr"]
    assert not (run_dir_of(doc) / "repetitions" / "r1" / "commands" / "lint" / "stdout").exists()
    verify_archive(Path(doc["archive"]), pubkey=run_dir_of(doc) / "lab.pub")  # raises if bad


def test_a_tree_that_rewrites_its_protected_test_fails_with_a_finding(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(SHELL / "fixture", tree)
    (tree / "check.sh").write_text("#!/bin/sh\nexit 0\n")
    code, doc = lab(
        "evaluate",
        "--task",
        str(SHELL / "task.yaml"),
        "--tree",
        str(tree),
        "--out",
        str(tmp_path / "out"),
        "--skip-calibration",
    )
    assert code == 1 and doc["status"] == "fail"
    ev = results(doc)["evaluation"]
    assert ev["candidate"]["protected_changed"] == ["check.sh"]
    assert "protected file check.sh was changed" in ev["candidate"]["findings"][0]
    assert ev["repetitions"][0]["verdicts"]["T1"]["observed"] == "fail"
    assert results(doc)["calibration"] == {"met": 0, "total": 0}


def test_a_task_whose_fixture_already_passes_is_refused(tmp_path: Path, capsys: Any) -> None:
    path = copy_task(tmp_path, {})
    (path.parent / "fixture" / "value.txt").write_text("2\n")
    code, _ = lab(
        "evaluate",
        "--task",
        str(path),
        "--patch",
        str(SHELL / "seeds" / "correct.patch"),
        "--out",
        str(tmp_path / "out"),
    )
    err = capsys.readouterr().err
    assert code == 2 and "requires a failing baseline; it refuses to run" in err


def test_a_contract_whose_seed_is_not_caught_is_refused(tmp_path: Path, capsys: Any) -> None:
    path = copy_task(tmp_path, {}, expected="correct: {breaks: []}\nthree: {breaks: [T2]}\n")
    code, _ = lab(
        "evaluate",
        "--task",
        str(path),
        "--patch",
        str(SHELL / "seeds" / "correct.patch"),
        "--out",
        str(tmp_path / "out"),
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "is not calibrated: the seed 'three' broke T1 where T2 was expected" in err


@dataclass(frozen=True)
class FakeClause:
    verdict: str
    reason: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class FakeJudgement:
    clauses: Mapping[str, FakeClause] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"clauses": {c: v.verdict for c, v in self.clauses.items()}}


def fake_oracle(
    tree: Path,
    *,
    fixture: Path,
    out: Path,
    editable: Sequence[str],
    protected: Sequence[str],
    gocache: Path,
    attempts: int | None = None,
    timeout_s: float = 60.0,
) -> FakeJudgement:
    """T3: value.txt holds 2 (read from the tree as given), evidence written to ``out``."""
    assert fixture.is_dir() and gocache.is_dir() and editable == ("value.txt",)
    (out / "seen.txt").write_text((tree / "value.txt").read_text())
    ok = (tree / "value.txt").read_text() == "2\n"
    return FakeJudgement(
        {"T3": FakeClause("pass" if ok else "fail", "value", ("oracle/seen.txt",))}
    )


def broken_oracle(tree: Path, **_: Any) -> FakeJudgement:
    raise RuntimeError("the harness crashed")


@pytest.fixture()
def oracles() -> Any:
    for name, ref in (("test-oracle", "fake_oracle"), ("test-broken", "broken_oracle")):
        workloads.register(
            workloads.Workload(
                name=name,
                description="test",
                modules=(),
                oracle_ref=f"{__name__}:{ref}",
                oracle_clauses=("T3",),
            )
        )
    yield
    workloads.unregister("test-oracle")
    workloads.unregister("test-broken")


ORACLE_CHANGE = {
    "clauses": {
        "T1": {"requirement": "check", "command": "check"},
        "T2": {"requirement": "lint", "command": "lint"},
        "T3": {"requirement": "the oracle's", "oracle": True},
    },
    "success": {"clauses": ["T1", "T2", "T3"]},
}
ORACLE_SEEDS = (
    "correct: {breaks: []}\nthree: {breaks: [T1, T3]}\ntwo-lines: {breaks: [T1, T2, T3]}\n"
)


def test_the_workload_oracle_decides_its_clauses(tmp_path: Path, oracles: None) -> None:
    path = copy_task(tmp_path, {**ORACLE_CHANGE, "workload": "test-oracle"}, ORACLE_SEEDS)
    code, doc = lab(
        "evaluate",
        "--task",
        str(path),
        "--patch",
        str(SHELL / "seeds" / "correct.patch"),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 0
    rep = results(doc)["evaluation"]["repetitions"][0]
    assert rep["verdicts"]["T3"] == {
        "observed": "pass",
        "reason": "value",
        "evidence": ["oracle/seen.txt"],
    }
    assert (run_dir_of(doc) / "repetitions" / "r1" / "oracle" / "seen.txt").read_text() == "2\n"


def test_an_oracle_that_fails_leaves_its_clause_not_observed(tmp_path: Path, oracles: None) -> None:
    path = copy_task(tmp_path, {**ORACLE_CHANGE, "workload": "test-broken"}, ORACLE_SEEDS)
    code, doc = lab(
        "evaluate",
        "--task",
        str(path),
        "--patch",
        str(SHELL / "seeds" / "correct.patch"),
        "--out",
        str(tmp_path / "out"),
        "--skip-calibration",
    )
    assert code == 1
    ev = results(doc)["evaluation"]
    assert ev["clauses"]["T3"]["not-observed"] == 1 and ev["clauses"]["T3"]["pass"] == 0
    assert "RuntimeError: the harness crashed" in ev["repetitions"][0]["verdicts"]["T3"]["reason"]


def test_a_go_campaign_shows_capability_beside_its_failures(tmp_path: Path) -> None:
    """The adder task (Go): one agent fixes Add, one rewrites the protected test, one never
    converges. 1 of 3 met; the timed-out repetition's patch is judged too."""
    require("go", shutil.which("go") is not None, "go is not installed (apt-get install golang-go)")
    agents = ADDER / "agents"
    # words naming files relative to the working directory are copied into the sandbox
    command = "sh ../../../agents/by-repetition.sh . fix.sh tamper.sh never.sh"
    code, doc = lab(
        "campaign",
        "--task",
        str(ADDER / "task.yaml"),
        "--agent-cmd",
        command,
        "--repetitions",
        "3",
        "--require",
        "1",
        "--budget",
        "8",
        "--out",
        str(tmp_path),
        cwd=agents,
    )
    assert code == 0, doc
    assert [r["outcome"] for r in doc["repetitions"]] == ["met", "failed", "timed-out"]
    assert [r["failed_clauses"] for r in doc["repetitions"]] == [[], ["S1"], ["S1"]]
    data = results(doc)
    campaign = data["campaign"]
    assert (campaign["met"], len(campaign["repetitions"])) == (1, 3)
    assert len(campaign["evidence"]) == 9
    r2 = campaign["repetitions"][1]["evaluation"]
    assert r2["candidate"]["protected_changed"] == ["adder_test.go"]
    r3 = campaign["repetitions"][2]
    assert r3["agent"]["timed_out"] and r3["evaluation"]["status"] == "fail"
    tests = r3["evaluation"]["repetitions"][0]["commands"]["test"]["report"]["tests"]
    assert tests["adder.TestAdd"] == "fail" and tests["adder.TestAddZero"] == "pass"
    commits = {
        json.loads((run_dir_of(doc) / "repetitions" / f"r{i}" / "workspace.json").read_text())[
            "baseline_commit"
        ]
        for i in (1, 2, 3)
    }
    assert len(commits) == 1
    files = json.loads((run_dir_of(doc) / "repetitions" / "r1" / "workspace.json").read_text())
    assert sorted(files["files"]) == [
        ".gitignore",
        "TASK.md",
        "adder.go",
        "adder_test.go",
        "go.mod",
    ]


def test_a_failed_repetition_is_escalated_and_met_from_the_package(tmp_path: Path) -> None:
    """--escalate-cmd on a fixture task: the first agent writes the wrong value (T1 fails);
    the second starts from the baseline with the signed package and meets the task."""
    agents = ASSETS / "agents"
    code, doc = lab(
        "campaign",
        "--task",
        str(SHELL / "task.yaml"),
        "--agent-cmd",
        f"sh {agents / 'shell-wrong.sh'}",
        "--escalate-cmd",
        f"sh {agents / 'shell-escalated-fix.sh'}",
        "--out",
        str(tmp_path),
    )
    assert code == 1, doc  # --require counts the first agent's runs only
    [row] = doc["repetitions"]
    assert (row["outcome"], row["failed_clauses"]) == ("failed", ["T1"])
    assert row["escalation"] == {"outcome": "met", "failed_clauses": []}
    data = results(doc)
    summary = data["campaign"]["escalation"]
    tiers = summary["tiers"]
    assert [(t["met"], t["runs"]) for t in (tiers["1"], tiers["2"])] == [(0, 1), (1, 1)]
    assert summary["verified_successes"] == 1 and tiers["2"]["agent_s"] > 0
    assert data["campaign"]["agent"]["escalate_command"].endswith("shell-escalated-fix.sh")
    rep = data["campaign"]["repetitions"][0]
    assert rep["escalated"]["evaluation"]["status"] == "pass"
    r1 = run_dir_of(doc) / "repetitions" / "r1"
    package = r1 / "escalation-package"
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=package, capture_output=True)
    assert checked.returncode == 0, checked.stdout
    run_key = PublicKey.from_signify((run_dir_of(doc) / "lab.pub").read_text(), what="lab.pub")
    signature = (package / "SHA256SUMS.sig").read_text()
    verify_detached((package / "SHA256SUMS").read_bytes(), signature, run_key, what="sums")
    constraints = json.loads((package / "constraints.json").read_text())
    assert constraints["clauses_deciding_success"] == ["T1", "T2"]
    assert (package / "verification" / "r1" / "check" / "stdout").read_text() == "value is 3\n"
    said = (r1 / "escalation" / "agent.stdout").read_text()
    assert "check.sh said: value is 3" in said and "hold 2" in said
    workspace = json.loads((r1 / "escalation" / "workspace.json").read_text())
    first = json.loads((r1 / "workspace.json").read_text())
    assert workspace["baseline_commit"] == first["baseline_commit"]  # a fresh workspace
    report = (run_dir_of(doc) / "report.md").read_text()
    assert "## Escalation" in report and "| tier 2: escalated (--escalate-cmd) | 1/1 |" in report
    verify_archive(Path(doc["archive"]), pubkey=run_dir_of(doc) / "lab.pub")
