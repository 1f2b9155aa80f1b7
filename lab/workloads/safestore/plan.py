"""The names the safe-store harness writes and the directory they are written in: the lab's
own legitimate and hostile names (never in the fixture, never shown to the agent), the
layout planted before the run (a root, an outside directory beside it, symlinks from the
root to the outside, the race's two entries) and the two things the lab reads afterwards:
the outside's contents (a listing with digests, before and after) and the legitimate files.

    layout = Layout.plant(work, uid=uid, gid=gid, attempts=500)
    layout.plan_json()                 # the harness's plan
    before = layout.outside_listing()
    ...                                # the harness runs
    changes = listing_changes(before, layout.outside_listing())
    landed = layout.read_back()        # {name: None (right content) or what is wrong}
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

#: legitimate names: nested, dotted, deep, odd characters, an overwrite (the last wins)
LEGIT_NAMES: tuple[str, ...] = (
    "note.txt",
    "a/b/c.txt",
    "reports/v1..v2.txt",
    "..hidden-dots",
    "deep/1/2/3/4/5/file.bin",
    "with space/ünïcode.txt",
    "existing/dir/inside.txt",
    "a/b/sibling.txt",
    "./dot/start.txt",
    "note.txt",
)
#: hostile names, each meant to land outside the root; OUTSIDE is replaced by the
#: outside directory's absolute path
HOSTILE_NAMES: tuple[str, ...] = (
    "../x-dotdot.txt",
    "a/../../x-normalized.txt",
    "a/b/../../../x-deep.txt",
    "../outside/x-sibling.txt",
    "./../x-dot.txt",
    "a//../../x-slashes.txt",
    "OUTSIDE/x-absolute.txt",
    "link/x-link.txt",
    "link/sub/x-link-sub.txt",
    "file-link",
    "dangle",
    "existing/../../x-existing.txt",
)
#: symlinks planted in the root: name -> target relative to the outside directory
#: ("" is the outside directory itself)
PLANTED: dict[str, str] = {
    "link": "",
    "file-link": "target.txt",
    "dangle": "dangle-target.txt",
}
RACE_A = "race/d"
RACE_B = "race/s"
RACE_NAME = "race/d/w-%06d.txt"
TARGET_CONTENT = b"the outside file a symlink in the root points at\n"


def content_for(index: int, name: str) -> str:
    return f"safestore legitimate write {index}: {name}\n"


@dataclass(frozen=True)
class Layout:
    """The planted directory: ``base/root`` (the Store's root), ``base/outside``."""

    base: Path
    attempts: int

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def outside(self) -> Path:
        return self.base / "outside"

    @classmethod
    def plant(cls, base: Path, *, uid: int, gid: int, attempts: int) -> Layout:
        layout = cls(base, attempts)
        for path in (layout.root, layout.outside, layout.root / "existing" / "dir"):
            path.mkdir(mode=0o755, parents=True, exist_ok=True)
        (layout.root / RACE_A).mkdir(parents=True)
        (layout.root / RACE_B).symlink_to(layout.outside)
        (layout.outside / "target.txt").write_bytes(TARGET_CONTENT)
        for name, target in PLANTED.items():
            (layout.root / name).symlink_to(layout.outside / target if target else layout.outside)
        for path in [layout.base, *layout.base.rglob("*")]:
            os.lchown(path, uid, gid)
        return layout

    def links(self) -> dict[str, str]:
        """Every symlink the lab planted whose target never changes: path -> target."""
        return {
            str(self.root / name): str(self.outside / target if target else self.outside)
            for name, target in PLANTED.items()
        }

    def swapped(self) -> tuple[str, str]:
        """The race's two entries (either may be the symlink to the outside)."""
        return str(self.root / RACE_A), str(self.root / RACE_B)

    def plan(self) -> dict[str, object]:
        hostile = [n.replace("OUTSIDE", str(self.outside)) for n in HOSTILE_NAMES]
        return {
            "root": str(self.root),
            "legit": [{"name": n, "content": content_for(i, n)} for i, n in enumerate(LEGIT_NAMES)],
            "hostile": [{"name": n, "content": "hostile\n"} for n in hostile],
            "race_a": RACE_A,
            "race_b": RACE_B,
            "race_name": RACE_NAME,
            "attempts": self.attempts,
        }

    def plan_json(self) -> str:
        return json.dumps(self.plan(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    def outside_listing(self) -> dict[str, str]:
        """Everything under ``base`` but the root: relative path -> kind and digest."""
        found: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(self.base):
            here = Path(dirpath)
            if here == self.base:
                dirnames[:] = [d for d in dirnames if d != "root"]
                filenames = [f for f in filenames if f != "root"]
            for name in [*dirnames, *filenames]:
                found[str((here / name).relative_to(self.base))] = _describe(here / name)
        return dict(sorted(found.items()))

    def read_back(self) -> dict[str, str | None]:
        """Each legitimate name -> None when the root holds it as a regular file with the
        content last written to it, else what is wrong."""
        expected: dict[str, str] = {}
        for index, name in enumerate(LEGIT_NAMES):
            expected[name] = content_for(index, name)
        root = os.path.realpath(self.root)
        verdicts: dict[str, str | None] = {}
        for name, content in expected.items():
            path = self.root / name
            real = os.path.realpath(path)
            if not real.startswith(root + "/"):
                verdicts[name] = f"resolves outside the root ({real})"
            elif not path.exists() and not path.is_symlink():
                verdicts[name] = "missing"
            elif path.is_symlink() or not path.is_file():
                verdicts[name] = "not a regular file"
            elif path.read_bytes() != content.encode():
                verdicts[name] = f"holds {path.read_bytes()[:80]!r}, not the content written"
            else:
                verdicts[name] = None
        return verdicts


def _describe(path: Path) -> str:
    if path.is_symlink():
        return f"symlink -> {os.readlink(path)}"
    if path.is_dir():
        return "directory"
    if path.is_file():
        data = path.read_bytes()
        return f"file {len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()}"
    return "other"


def listing_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per entry added, removed or changed outside the root."""
    lines = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if old is None:
            lines.append(f"added {path}: {new}")
        elif new is None:
            lines.append(f"removed {path}: was {old}")
        else:
            lines.append(f"changed {path}: {old} -> {new}")
    return lines
