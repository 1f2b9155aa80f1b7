"""``lab evaluate``'s build step as a campaign uses it: ``make`` handed to a runner (the
sandbox), and a built "binary" that is a symbolic link never taken."""

from __future__ import annotations

import os
from pathlib import Path

from lab.evaluate.candidate import Candidate, build
from lab.host import procs


def candidate(tree: Path) -> Candidate:
    return Candidate(kind="patch", given=tree / "x.patch", workspace=tree, input_sha256="0" * 64)


def test_make_goes_to_the_runner(tmp_path: Path) -> None:
    tree = tmp_path / "native"
    tree.mkdir()
    seen: list[list[str]] = []

    def runner(argv: list[str], out: Path, err: Path, limit: float) -> tuple[int | None, bool]:
        seen.append(argv)
        binary = tree / "backup-client"
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
        out.write_text("built\n")
        return 0, False

    c = candidate(tree)
    build(
        c,
        procs.CommandLog(tmp_path / "c.jsonl", root=tmp_path),
        tmp_path / "logs",
        make_runner=runner,
    )
    assert seen == [["make", "-C", str(tree)]]
    assert c.build.status == "built" and c.binary == tree / "backup-client"


def test_a_symlinked_binary_is_not_taken(tmp_path: Path) -> None:
    tree = tmp_path / "native"
    tree.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("key")
    secret.chmod(0o755)

    def runner(argv: list[str], out: Path, err: Path, limit: float) -> tuple[int | None, bool]:
        os.symlink(secret, tree / "backup-client")
        return 0, False

    c = candidate(tree)
    build(
        c,
        procs.CommandLog(tmp_path / "c.jsonl", root=tmp_path),
        tmp_path / "logs",
        make_runner=runner,
    )
    assert c.binary is None and c.build.status == "build-failed"
