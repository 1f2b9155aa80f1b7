"""The workspace: only what the agent may see, one baseline commit every time, and after
the agent a patch with new and binary files, the built native.patch and a bundle that
restores independently."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import resources
from lab.campaign import workspace
from lab.host import procs
from tests.conftest import require


@pytest.fixture(autouse=True)
def _git() -> None:
    require("git", shutil.which("git") is not None, "git is not installed")


def make(tmp_path: Path, name: str) -> workspace.Workspace:
    scratch = tmp_path / name
    scratch.mkdir()
    return workspace.create(scratch, "do it", uid=os.getuid(), gid=os.getgid(), log=None)


def test_the_workspace_holds_only_what_the_agent_may_see(tmp_path: Path) -> None:
    ws = make(tmp_path, "a")
    files = sorted(ws.manifest)
    assert "TASK.md" in files and ".gitignore" in files
    assert "docs/client-contract.md" in files and "docs/protocol.md" in files
    assert "native/Makefile" in files and "native/main.c" in files
    assert not [
        f for f in files if f.split("/")[0] not in ("native", "docs", "TASK.md", ".gitignore")
    ]
    assert not [f for f in files if f.startswith("docs/") and f not in workspace.PUBLIC_DOCS]
    assert not [f for f in files if f.endswith((".o", "backup-client"))]
    assert (ws.root / ".git").is_dir()  # the agent's own repository
    assert ws.gitdir.parent != ws.root  # the lab's is outside


def test_every_repetition_starts_from_the_same_commit(tmp_path: Path) -> None:
    assert make(tmp_path, "a").baseline_commit == make(tmp_path, "b").baseline_commit


def test_the_patch_has_new_and_binary_files_and_the_bundle_restores(tmp_path: Path) -> None:
    ws = make(tmp_path, "a")
    main = ws.root / "native" / "main.c"
    main.write_text(main.read_text() + "/* faster */\n")
    (ws.root / "native" / "table.bin").write_bytes(bytes(range(256)))
    (ws.root / "NOTES.md").write_text("what I did\n")
    (ws.root / "native" / "main.o").write_bytes(b"\0object")  # build output: ignored
    os.mkfifo(ws.root / "a-fifo")  # would block a naive copy
    rep = tmp_path / "r1"
    capture = workspace.take(ws, rep, log=None)
    patch = (rep / "patch.diff").read_text()
    assert "GIT binary patch" in patch and "NOTES.md" in patch and "/* faster */" in patch
    assert "main.o" not in patch
    assert capture.files_changed == ("NOTES.md", "native/main.c", "native/table.bin")
    assert capture.outside_native == ("NOTES.md",)
    assert not capture.native_empty
    assert "a/native/main.c" in (rep / "native.patch").read_text()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(rep / "final.bundle"), str(clone)], check=True)
    assert (clone / "native" / "table.bin").read_bytes() == bytes(range(256))
    log = subprocess.run(
        ["git", "-C", str(clone), "log", "--format=%H", "--all"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert log[-1] == ws.baseline_commit and log[0] == capture.final_commit


def test_no_change_is_an_empty_native_patch(tmp_path: Path) -> None:
    ws = make(tmp_path, "a")
    capture = workspace.take(
        ws, tmp_path / "r1", log=procs.CommandLog(tmp_path / "c.jsonl", root=tmp_path)
    )
    assert capture.native_empty and capture.files_changed == () and capture.patch_bytes == 0
    assert (tmp_path / "c.jsonl").read_text().count('"git"') >= 1


def test_hooks_the_agent_leaves_never_run(tmp_path: Path) -> None:
    ws = make(tmp_path, "a")
    marker = tmp_path / "hook-ran"
    hook = ws.root / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    (ws.root / ".git" / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    (ws.root / "native" / "x.c").write_text("int x;\n")
    workspace.take(ws, tmp_path / "r1", log=None)
    assert not marker.exists()


def test_a_checkout_without_the_public_contract_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the lab image once lacked docs/: the campaign died with a FileNotFoundError traceback
    from lab.errors import CampaignError

    repo = tmp_path / "repo"
    shutil.copytree(resources.native_dir(), repo / "native")
    monkeypatch.setattr(resources, "path", lambda rel: repo / rel)
    monkeypatch.setattr(resources, "native_dir", lambda: repo / "native")
    scratch = tmp_path / "s"
    scratch.mkdir()
    with pytest.raises(CampaignError, match=r"docs/protocol\.md is missing"):
        workspace.create(scratch, "do it", uid=os.getuid(), gid=os.getgid(), log=None)
