"""The oracle without the capabilities it needs: never a pass or a fail it did not see."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.errors import WorkloadError
from lab.workloads.safestore import SafeStoreJudgement, gobuild, judge_candidate
from tests.conftest import ROOT

FIXTURE = ROOT / "campaigns" / "safe-store" / "fixture"
MISSING = "go is not installed or not on PATH; install the Debian package 'golang-go'."


@pytest.fixture
def no_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gobuild, "go_available", lambda: MISSING)


def judged_copy(tmp_path: Path, edit: dict[str, str]) -> SafeStoreJudgement:
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURE, tree)
    for name, text in edit.items():
        (tree / name).write_text(text)
    return judge_candidate(
        tree,
        fixture=FIXTURE,
        out=tmp_path / "out",
        editable=["store.go"],
        protected=["store_test.go"],
        gocache=tmp_path / "cache",
    )


def test_missing_go_is_not_observed(no_go: None, tmp_path: Path) -> None:
    judged = judged_copy(tmp_path, {})
    assert judged.clauses["S3"].verdict == "not-observed"
    assert judged.clauses["S4"].verdict == "not-observed"
    assert judged.clauses["S3"].reason == MISSING
    # the files were compared, the API could not be: not a pass
    assert judged.clauses["S5"].verdict == "not-observed"
    assert "golang-go" in judged.clauses["S5"].reason
    assert (tmp_path / "out" / "judgement.json").exists()


def test_a_stray_file_fails_scope_even_without_go(no_go: None, tmp_path: Path) -> None:
    judged = judged_copy(tmp_path, {"go.mod": "module safestore\n\ngo 1.22\n"})
    assert judged.clauses["S5"].verdict == "fail"
    assert "go.mod" in judged.clauses["S5"].reason


def test_a_tree_without_go_mod_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"holds no go\.mod"):
        judge_candidate(
            tmp_path,
            fixture=FIXTURE,
            out=tmp_path / "out",
            editable=[],
            protected=[],
            gocache=tmp_path / "cache",
        )
