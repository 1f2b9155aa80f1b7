"""``invoke --list`` and ``nox --list`` show each task's and session's first docstring line:
every one must be a whole sentence, never a line cut mid-sentence."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT

#: a first line that ends a sentence (not "..., (in the lab image:" or "... (on this")
_WHOLE = re.compile(r"[.!?]\)?$")


def _balanced(line: str) -> bool:
    return line.count("(") == line.count(")") and line.count("``") % 2 == 0


def _listing(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_invoke_list_shows_whole_sentences() -> None:
    text = _listing("invoke", "--list")
    # "  name   help that may wrap\n                  onto indented lines"
    entries: dict[str, str] = {}
    name = ""
    for line in text.splitlines()[1:]:
        if not line.strip():
            continue
        head = re.match(r"^  (\S+)\s+(.*)$", line)
        if head:
            name = head.group(1)
            entries[name] = head.group(2).strip()
        elif name:
            entries[name] += " " + line.strip()
    assert {"lab.run", "lab.evaluate", "lab.merge", "keys.generate"} <= set(entries)
    cut = {k: v for k, v in entries.items() if not (_WHOLE.search(v) and _balanced(v))}
    assert not cut, f"invoke --list cuts these mid-sentence: {cut}"


def test_nox_list_shows_whole_sentences() -> None:
    text = _listing("nox", "--list")
    entries = dict(re.findall(r"^[*-] (\S+) -> (.*)$", text, flags=re.MULTILINE))
    assert {"lint", "typecheck", "tests", "e2e", "repro"} <= set(entries)
    cut = {k: v for k, v in entries.items() if not (_WHOLE.search(v) and _balanced(v))}
    assert not cut, f"nox --list cuts these mid-sentence: {cut}"
