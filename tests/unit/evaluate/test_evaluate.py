"""Candidate preparation and the frozen evaluation id, without running anything."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.errors import UsageError
from lab.evaluate import candidate, judge
from lab.host.procs import CommandLog
from lab.model.evaluation import EvaluationLimits, FrozenEvaluation
from lab.workloads.backup import scenario
from tests.conftest import ASSETS, ROOT, require

PATCH = ASSETS / "candidates" / "gives-up-on-drop.patch"


def _patch_tool() -> None:
    import shutil

    require("patch", shutil.which("patch") is not None, "patch is not installed")


@pytest.mark.parametrize("relative_to_native", [False, True])
def test_patch_applies_to_a_copy_either_way(tmp_path: Path, relative_to_native: bool) -> None:
    _patch_tool()
    patch = PATCH
    if relative_to_native:
        patch = tmp_path / "inside.patch"
        text = PATCH.read_text().replace("a/native/", "a/").replace("b/native/", "b/")
        patch.write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    prepared = candidate.prepare("patch", patch, work, CommandLog(tmp_path / "c.jsonl"))
    assert prepared.build.status != "patch-failed", prepared.build
    patched = (work / "native" / "main.c").read_text()
    assert "retrying is wasteful" in patched
    assert "retrying is wasteful" not in (ROOT / "native" / "main.c").read_text()


def test_a_patch_that_does_not_apply_is_a_result(tmp_path: Path) -> None:
    _patch_tool()
    bad = tmp_path / "bad.patch"
    bad.write_text("--- a/native/main.c\n+++ b/native/main.c\n@@ -1,1 +1,1 @@\n-nope\n+nada\n")
    work = tmp_path / "work"
    work.mkdir()
    prepared = candidate.prepare("patch", bad, work, CommandLog(tmp_path / "c.jsonl"))
    assert prepared.build.status == "patch-failed"


def test_missing_candidate_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or directory"):
        candidate.prepare("binary", tmp_path / "nope", tmp_path, CommandLog(tmp_path / "c"))
    (tmp_path / "src").mkdir()
    with pytest.raises(UsageError, match="needs a directory with a Makefile"):
        candidate.prepare("source-dir", tmp_path / "src", tmp_path, CommandLog(tmp_path / "c"))


def test_evaluation_id_depends_on_what_defines_passing() -> None:
    conditions = scenario.select(ROOT / "scenarios" / "candidate", [], True)
    limits = EvaluationLimits(invocation_timeout_s=60.0, build_timeout_s=300.0, timing_runs=20)
    a = judge.freeze(conditions, size=524_288, repetitions=3, limits=limits)
    b = judge.freeze(conditions, size=524_288, repetitions=3, limits=limits)
    assert a.evaluation_id == b.evaluation_id and a.evaluation_id.startswith("eval-")
    assert "lab/workloads/backup/contract.py" in a.files and "docs/client-contract.md" in a.files
    c = judge.freeze(conditions, size=1024, repetitions=3, limits=limits)
    d = judge.freeze(conditions, size=524_288, repetitions=5, limits=limits)
    e = judge.freeze(conditions, size=524_288, repetitions=3, limits=replace(limits, timing_runs=2))
    assert len({a.evaluation_id, c.evaluation_id, d.evaluation_id, e.evaluation_id}) == 4
    assert FrozenEvaluation.from_dict(a.to_dict()) == a
