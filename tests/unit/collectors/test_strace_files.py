"""File-system effects read from strace -f -yy traces: a hand-written trace of the nasty
cases and two captured runs of the safe-store harness (vulnerable and correct Store)."""

from __future__ import annotations

import gzip
from pathlib import Path

from lab.collectors.strace_files import (
    exec_pids,
    family,
    file_effects,
    inside,
    redirect,
    verbatim,
)
from lab.collectors.strace_parse import iter_syscalls


def effects_of(text: str) -> list[tuple[str, str, str]]:
    calls, _ = iter_syscalls(text)
    return [(e.call, e.action, e.path) for e in file_effects(calls)]


def test_hand_written_effects(assets: Path) -> None:
    text = (assets / "safestore" / "effects.txt").read_text()
    assert effects_of(text) == [
        ("openat", "opened for writing", "/w/root/a.txt"),
        # in order of completion: the rename returns while the open is unfinished
        ("renameat2", "renamed", "/w/root/race/d"),
        ("renameat2", "renamed", "/w/root/race/s"),
        # the kernel's path from the resumed call's descriptor, not the name given
        ("openat", "opened for writing", "/w/outside/b.txt"),
        # a read-only open and a failed open are no effect
        ("mkdirat", "created", "/w/root/sub"),
        ("mkdirat", "created", "/w/root/link/made"),
        ("mkdirat", "created", "/w/escaped"),
        ("renameat", "renamed", "/w/root/tmp"),
        ("renameat", "renamed", "/w/outside/moved"),
        ("linkat", "linked", "/w/outside/secret"),
        ("linkat", "linked", "/w/root/secret"),
        ("symlinkat", "linked", "/w/root/pw"),
        ("unlinkat", "removed", "/w/outside/victim"),
        ("openat2", "opened for writing", "/w/root/c.txt"),
        # no directory to resolve against: never taken for a path under a root
        ("mkdir", "created", "?['\"relative\"']"),
        ("openat", "opened for writing", "?['\"x\"']"),
        ("creat", "opened for writing", '/w/outside/"odd>name'),
    ]


def test_witness_kinds_and_verbatim_lines(assets: Path) -> None:
    text = (assets / "safestore" / "effects.txt").read_text()
    calls, _ = iter_syscalls(text)
    effects = file_effects(calls)
    assert effects[3].witness == "descriptor"
    assert effects[5].witness == "lexical"
    lines = verbatim(text, effects[3])
    assert len(lines) == 2
    assert lines[0].endswith("<unfinished ...>")
    assert "<... openat resumed>) = 4</w/outside/b.txt>" in lines[1]
    assert verbatim(text, effects[0]) == (text.splitlines()[0],)


def test_inside_and_redirect() -> None:
    assert inside("/w/root", "/w/root")
    assert inside("/w/root/a", "/w/root")
    assert not inside("/w/rootkit/a", "/w/root")
    assert not inside("?['\"x\"']", "/w/root")
    links = {"/w/root/link": "/w/outside", "/w/root/file-link": "/w/outside/t.txt"}
    assert redirect("/w/root/link/made", links) == "/w/outside/made"
    assert redirect("/w/root/file-link", links) == "/w/outside/t.txt"
    assert redirect("/w/root/linked/x", links) == "/w/root/linked/x"


def _captured(assets: Path, name: str) -> str:
    return gzip.decompress((assets / "safestore" / f"strace-{name}.txt.gz").read_bytes()).decode()


def test_attacker_found_by_its_execve_even_with_argv0_cut_short(assets: Path) -> None:
    calls, _ = iter_syscalls(_captured(assets, "correct"))
    attackers = exec_pids(calls, ["harness", "attack"])
    assert len(attackers) == 1
    # the attacker's Go runtime threads come from its own clones
    assert len(family(calls, attackers)) > 1
    assert exec_pids(calls, ["harness", "defend"]) == []


def test_captured_vulnerable_run_writes_outside(assets: Path) -> None:
    text = _captured(assets, "vulnerable")
    calls, _ = iter_syscalls(text)
    outside = [
        e for e in file_effects(calls) if e.witness == "descriptor" and "/work/outside/" in e.path
    ]
    # the symlinked parent, the symlinked file, the dangling link, the race's writes
    names = {e.path.rsplit("/", 1)[-1] for e in outside}
    assert {"x-link.txt", "x-link-sub.txt", "target.txt", "dangle-target.txt"} <= names
    assert any(n.startswith("w-") for n in names)
