"""The package's shape, enforced: no import cycle between lab modules (counting imports made
inside functions, which only postpone a cycle), no module longer than can be read in one
sitting, and docs/architecture.md lists every module (and nothing that is gone)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

LAB = ROOT / "lab"
#: the most lines a module under lab/ may have (the layout's promise: read in one sitting)
MAX_LINES = 550


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module under lab/."""
    found: dict[str, Path] = {}
    for path in sorted(LAB.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The lab modules ``path`` imports, at top level or inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # "from lab.container import engine" imports the module lab.container.engine
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name in known}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, set(known)) - {name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), as a readable loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_is_read() -> None:
    edges = graph()
    assert "lab._cli" in edges and "lab.container.engine" in edges["lab.container.run"]
    # function-level imports count: _cli imports the evaluation judge inside cmd_evaluate
    assert "lab.evaluate.judge" in edges["lab._cli"]


def test_no_import_cycle_between_lab_modules() -> None:
    found = cycles(graph())
    assert not found, "import cycles between lab modules: " + "; ".join(
        " <-> ".join(group) for group in found
    )


def test_no_module_is_longer_than_can_be_read_in_one_sitting() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do): {long}"


def test_every_module_opens_with_a_docstring() -> None:
    bare = [
        str(path.relative_to(ROOT))
        for path in modules().values()
        if path.read_text().strip() and ast.get_docstring(ast.parse(path.read_text())) is None
    ]
    assert not bare, f"modules without a usage docstring: {bare}"


def test_architecture_lists_every_module_and_nothing_else() -> None:
    """A newcomer finds any behaviour in one hop: docs/architecture.md names every
    ``lab/**.py`` file (by its path), and every path it names exists."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`(lab/[\w/]+\.py)`", doc))
    actual = {str(path.relative_to(ROOT)) for path in modules().values()}
    assert not actual - named, (
        f"modules docs/architecture.md does not list: {sorted(actual - named)}"
    )
    assert not named - actual, (
        f"docs/architecture.md lists modules that do not exist: {sorted(named - actual)}"
    )
