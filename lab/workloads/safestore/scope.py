"""Safe-store's S5, scope: which files of the candidate differ from the fixture (only
editable ones may), whether a protected file differs, and whether the exported API (as
``apidump`` prints it: exported declarations, parameter names left out) is unchanged.

    changed = changed_files(tree, fixture)            # ["store.go"]
    outside_scope(changed, editable=["store.go"])     # []
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
from collections.abc import Sequence
from pathlib import Path

#: what a Go tree may hold that is nobody's edit
IGNORED_PARTS = frozenset({".git"})


def _files(tree: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree)
        if IGNORED_PARTS & set(rel.parts) or (path.is_dir() and not path.is_symlink()):
            continue
        if path.is_symlink():
            found[rel.as_posix()] = f"symlink {path.readlink()}"
        else:
            found[rel.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def changed_files(tree: Path, fixture: Path) -> list[str]:
    """Files added, removed or changed in ``tree`` compared with ``fixture``."""
    mine, theirs = _files(tree), _files(fixture)
    return sorted(p for p in mine.keys() | theirs.keys() if mine.get(p) != theirs.get(p))


def _matches(path: str, patterns: Sequence[str]) -> bool:
    return any(path == p or fnmatch.fnmatchcase(path, p) for p in patterns)


def outside_scope(changed: Sequence[str], *, editable: Sequence[str]) -> list[str]:
    return [p for p in changed if not _matches(p, editable)]


def protected_changed(changed: Sequence[str], *, protected: Sequence[str]) -> list[str]:
    return [p for p in changed if _matches(p, protected)]


def api_diff(fixture_api: str, candidate_api: str) -> list[str]:
    """The unified diff of the two API listings (empty when they are the same)."""
    return list(
        difflib.unified_diff(
            fixture_api.splitlines(),
            candidate_api.splitlines(),
            "fixture",
            "candidate",
            lineterm="",
        )
    )
