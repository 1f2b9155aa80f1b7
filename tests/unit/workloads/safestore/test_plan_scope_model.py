"""The planted layout, the outside's listing, the read-back of legitimate names, S5's file
and API comparison, and the judgement's round trip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.model.safestore import ClauseResult, SafeStoreJudgement
from lab.workloads.safestore.plan import (
    HOSTILE_NAMES,
    LEGIT_NAMES,
    Layout,
    content_for,
    listing_changes,
)
from lab.workloads.safestore.scope import (
    api_diff,
    changed_files,
    outside_scope,
    protected_changed,
)


def planted(tmp_path: Path) -> Layout:
    return Layout.plant(tmp_path / "work", uid=os.getuid(), gid=os.getgid(), attempts=5)


def test_layout_plants_links_to_the_outside(tmp_path: Path) -> None:
    layout = planted(tmp_path)
    assert (layout.root / "link").resolve() == layout.outside.resolve()
    assert (layout.root / "race" / "s").resolve() == layout.outside.resolve()
    assert (layout.root / "race" / "d").is_dir()
    plan = layout.plan()
    assert plan["attempts"] == 5
    hostile = [h["name"] for h in plan["hostile"]]  # type: ignore[attr-defined]
    assert f"{layout.outside}/x-absolute.txt" in hostile
    assert "reports/v1..v2.txt" in LEGIT_NAMES and "reports/v1..v2.txt" not in HOSTILE_NAMES


def test_listing_sees_writes_outside_and_ignores_the_root(tmp_path: Path) -> None:
    layout = planted(tmp_path)
    before = layout.outside_listing()
    assert "root" not in before and "outside/target.txt" in before
    (layout.root / "inside.txt").write_text("fine")
    (layout.outside / "w-000001.txt").write_text("escaped")
    (layout.outside / "target.txt").write_text("overwritten")
    (layout.base / "x-dotdot.txt").write_text("escaped")
    changes = listing_changes(before, layout.outside_listing())
    assert [c.split(":")[0] for c in changes] == [
        "changed outside/target.txt",
        "added outside/w-000001.txt",
        "added x-dotdot.txt",
    ]


def test_read_back_checks_content_type_and_place(tmp_path: Path) -> None:
    layout = planted(tmp_path)
    for index, name in enumerate(LEGIT_NAMES):
        path = layout.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content_for(index, name))
    assert set(layout.read_back().values()) == {None}
    (layout.root / "a/b/c.txt").write_text("something else")
    (layout.root / "note.txt").unlink()
    (layout.root / "note.txt").symlink_to(layout.outside / "target.txt")
    verdicts = layout.read_back()
    assert verdicts["a/b/c.txt"] is not None and "not the content" in verdicts["a/b/c.txt"]
    assert verdicts["note.txt"] is not None and "outside the root" in verdicts["note.txt"]


def test_scope_compares_files_and_patterns(tmp_path: Path) -> None:
    fixture, tree = tmp_path / "fixture", tmp_path / "tree"
    for d in (fixture, tree):
        d.mkdir()
        (d / "go.mod").write_text("module safestore\n")
        (d / "store_test.go").write_text("package safestore\n")
        (d / "store.go").write_text("package safestore\n")
    (tree / ".git").mkdir()
    (tree / ".git" / "HEAD").write_text("ref")
    assert changed_files(tree, fixture) == []
    (tree / "store.go").write_text("package safestore // fixed\n")
    (tree / "helper.go").write_text("package safestore\n")
    (tree / "store_test.go").write_text("package safestore // weakened\n")
    changed = changed_files(tree, fixture)
    assert changed == ["helper.go", "store.go", "store_test.go"]
    assert outside_scope(changed, editable=["store.go"]) == ["helper.go", "store_test.go"]
    assert outside_scope(changed, editable=["*.go"]) == []
    assert protected_changed(changed, protected=["*_test.go"]) == ["store_test.go"]


def test_api_diff() -> None:
    api = "func New(string) *Store\npackage safestore\n"
    assert api_diff(api, api) == []
    diff = api_diff(api, "func New(string) (*Store, error)\npackage safestore\n")
    assert "-func New(string) *Store" in diff and "+func New(string) (*Store, error)" in diff


def test_judgement_round_trip() -> None:
    judged = SafeStoreJudgement(
        {
            "S3": ClauseResult("fail", "escaped.", ("s3-violations.txt",)),
            "S4": ClauseResult("pass", "landed."),
            "S5": ClauseResult("not-observed", "go missing."),
        },
        {"attempts": 400, "harness_wall_s": 1.5, "go_version": None},
    )
    assert SafeStoreJudgement.from_dict(judged.to_dict()) == judged
    with pytest.raises(ValueError):
        ClauseResult("maybe", "no such verdict")  # type: ignore[arg-type]
