"""Safe-store's oracle on the seeded patches (campaigns/safe-store/seeds/): each one is
judged on S3–S5 by the kernel's trace, the outside's listing, the read-back and the API
comparison, and must break exactly the clauses expected.yaml says; the untouched fixture
fails its own tests (the required failing baseline) and passes go vet."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lab.collectors.strace import StraceCollector
from lab.errors import LabError
from lab.host import procs
from lab.sandbox import Sandbox, SandboxSettings
from lab.sandbox.cgroup import CgroupTree, Limits
from lab.sandbox.user import ClientUser
from lab.workloads.safestore import SafeStoreJudgement, judge_candidate
from lab.workloads.safestore.gobuild import go_available
from tests.conftest import ROOT, require

TASK = ROOT / "campaigns" / "safe-store"
FIXTURE = TASK / "fixture"
EXPECTED = yaml.safe_load((TASK / "seeds" / "expected.yaml").read_text())["seeds"]
ORACLE_CLAUSES = ("S3", "S4", "S5")
#: check-then-write loses the race in a few per cent of its raced writes, so one
#: evaluation misses with a probability measured near zero (benchmarks/safestore_race.py);
#: a retry bounds a rare miss on a loaded machine (or a race lost by mkdir only), and the
#: benchmark reports the true rate
RACE_RETRIES = 4


@pytest.fixture(scope="module")
def go() -> None:
    missing = go_available()
    require("go", missing is None, missing)


@pytest.fixture(scope="module")
def gocache(go: None) -> Path:
    """Go's own build cache (content-addressed; the harness's build is warm after the first
    session), as a caller of ``judge_candidate`` passes one per run."""
    found = subprocess.run(["go", "env", "GOCACHE"], capture_output=True, text=True, check=True)
    return Path(found.stdout.strip())


@pytest.fixture(scope="module")
def sandbox(go: None) -> Iterator[Sandbox]:
    """The client sandbox, made as ``Sandbox.open`` makes it but without its refusal to
    start while another lab run's clients are alive (this machine may be shared): this
    judgement's harness still runs in a cgroup of its own. A sandbox that cannot work
    here shows as S3/S4 ``not-observed``, which fails these tests."""
    status = StraceCollector.probe()
    require("strace", status.available, status.reason)
    try:
        for tool in ("bwrap", "capsh", "nsenter", "prlimit", "ip"):
            procs.require_tool(tool)
        group = CgroupTree.discover().run_group(f"test-safestore-{time.time_ns()}", Limits())
        user = ClientUser.ensure()
    except LabError as error:
        require("sandbox", False, str(error))
    box = Sandbox(user=user, run_group=group, settings=SandboxSettings(), log=None)
    yield box
    box.close()


def candidate(tmp_path: Path, seed: str | None) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURE, tree)
    if seed is not None:
        patch = TASK / "seeds" / f"{seed}.patch"
        subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=tree, check=True)
    return tree


def judge(tree: Path, out: Path, sandbox: Sandbox, gocache: Path) -> SafeStoreJudgement:
    return judge_candidate(
        tree,
        fixture=FIXTURE,
        out=out,
        editable=["store.go"],
        protected=["store_test.go"],
        gocache=gocache,
        sandbox=sandbox,
    )


def verdicts(judged: SafeStoreJudgement) -> dict[str, str]:
    return {k: judged.clauses[k].verdict for k in ORACLE_CLAUSES}


def _kernel_saw_a_write(out: Path) -> bool:
    """The lost race was an open for writing outside the root, as strace decoded it. A race
    lost only through the racing directory entry (a mkdir by name, which the listing then
    confirms or not) says less of the kernel's witness, so the test tries again: the
    check-then-write seed loses both ways, at random (seen in CI after 1 of 2 runs)."""
    violations = out / "s3-violations.txt"
    return violations.exists() and "opened for writing" in violations.read_text()


@pytest.mark.parametrize("seed", sorted(EXPECTED))
def test_seed_breaks_exactly_its_clauses(
    seed: str, tmp_path: Path, sandbox: Sandbox, gocache: Path
) -> None:
    tree = candidate(tmp_path, seed)
    must_fail = [c for c in EXPECTED[seed]["must_fail"] if c in ORACLE_CLAUSES]
    must_pass = [c for c in EXPECTED[seed]["must_pass"] if c in ORACLE_CLAUSES]
    for attempt in range(1 + (RACE_RETRIES if seed == "check-then-write" else 0)):
        out = tmp_path / f"out-{attempt}"
        judged = judge(tree, out, sandbox, gocache)
        if all(judged.clauses[c].verdict == "fail" for c in must_fail) and (
            "S3" not in must_fail or _kernel_saw_a_write(out)
        ):
            break
    seen = verdicts(judged)
    assert all(seen[c] == "fail" for c in must_fail), (seen, judged.to_dict())
    assert all(seen[c] == "pass" for c in must_pass), (seen, judged.to_dict())
    for clause in ORACLE_CLAUSES:
        for evidence in judged.clauses[clause].evidence:
            assert (out / evidence).exists(), f"{clause} cites {evidence}, which is missing"
    if "S3" in must_fail:
        violations = (out / "s3-violations.txt").read_text()
        assert "opened for writing" in violations and "/work/outside/" in violations
    if seed == "correct":
        assert judged.figures["race_swaps"] and int(judged.figures["race_swaps"]) > 10
        assert judged.figures["kernel_violations"] == 0


def test_untouched_fixture_fails_s3_and_keeps_scope(
    tmp_path: Path, sandbox: Sandbox, gocache: Path
) -> None:
    judged = judge(candidate(tmp_path, None), tmp_path / "out", sandbox, gocache)
    assert verdicts(judged) == {"S3": "fail", "S4": "pass", "S5": "pass"}
    # every hostile name escapes, so the kernel sees far more than the race's few
    assert int(judged.figures["kernel_violations"] or 0) >= 11


def test_changed_api_and_protected_file_fail_scope(
    tmp_path: Path, sandbox: Sandbox, gocache: Path
) -> None:
    tree = candidate(tmp_path, "correct")
    store = tree / "store.go"
    store.write_text(
        store.read_text().replace(
            "func New(root string) *Store {", "func New(root string, _ ...int) *Store {"
        )
    )
    (tree / "store_test.go").write_text((tree / "store_test.go").read_text() + "\n// edited\n")
    judged = judge(tree, tmp_path / "out", sandbox, gocache)
    s5 = judged.clauses["S5"]
    assert s5.verdict == "fail"
    assert "exported API changed" in s5.reason and "protected" in s5.reason
    assert "+func New(string, ...int) *Store" in (tmp_path / "out" / "scope.txt").read_text()


def _go(tree: Path, gocache: Path, *args: str) -> int:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tree),
        "GOCACHE": str(gocache),
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOENV": "off",
    }
    return subprocess.run(["go", *args], cwd=tree, env=env, capture_output=True).returncode


@pytest.mark.parametrize("seed", [None, *sorted(EXPECTED)])
def test_fixture_tests_and_vet_as_expected(
    seed: str | None, tmp_path: Path, go: None, gocache: Path
) -> None:
    """S1 (the fixture's own tests under -race) and S2 (go vet) of each seed: the task's
    verification commands, run plainly here to check the seeds themselves."""
    tree = candidate(tmp_path, seed)
    s1 = "pass" if _go(tree, gocache, "test", "-count=1", "-race", "./...") == 0 else "fail"
    s2 = "pass" if _go(tree, gocache, "vet", "./...") == 0 else "fail"
    if seed is None:
        assert (s1, s2) == ("fail", "pass"), "the required failing baseline"
        return
    expected = EXPECTED[seed]
    for clause, seen in (("S1", s1), ("S2", s2)):
        if clause in expected["must_fail"]:
            assert seen == "fail", (seed, clause)
        if clause in expected["must_pass"]:
            assert seen == "pass", (seed, clause)
