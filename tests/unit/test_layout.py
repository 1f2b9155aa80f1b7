"""The package's shape, enforced: no import cycle between lab modules (counting imports made
inside functions, which only postpone a cycle), no import up the table of layers, no generic
part importing a workload, no module longer than can be read in one sitting, no function
longer than a screen unless a comment on its ``def`` says why, and docs/architecture.md lists
every module (and nothing that is gone)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

LAB = ROOT / "lab"
#: the most lines a module under lab/ may have (the layout's promise: read in one sitting)
MAX_LINES = 450
#: modules written before the cap was lowered from 550, with the length they may not exceed;
#: the list only shrinks (split one, delete its line)
LONG_MODULES: dict[str, int] = {
    "lab/evidence/checks.py": 528,
    "lab/model/evaluation.py": 547,
    "lab/run/runner.py": 500,
}
#: the most lines a function may have, unless a comment on its ``def`` line says why
MAX_FUNCTION_LINES = 60

#: functions written before the cap, over it and not yet split; the set only shrinks
LONG_FUNCTIONS: set[str] = {
    "lab/_parser.py::_add_run",
    "lab/_parser.py::_add_evaluate",
    "lab/_parser.py::_add_campaign",
    "lab/campaign/agent.py::run_agent",
    "lab/campaign/conduct.py::_repetition",
    "lab/campaign/conduct.py::_judge",
    "lab/collectors/packets_pcap.py::read_pcap",
    "lab/collectors/packets_pcap.py::summarize_packets",
    "lab/collectors/perf.py::summarize",
    "lab/collectors/strace_parse.py::iter_syscalls",
    "lab/container/base.py::bootstrap_base",
    "lab/container/repro.py::reproduce",
    "lab/evaluate/judge.py::_evaluate",
    "lab/evaluate/judge.py::judge_built",
    "lab/evaluate/timing.py::alternate",
    "lab/evidence/checks.py::structure_checks",
    "lab/evidence/checks.py::checksum_checks",
    "lab/evidence/checks.py::signature_checks",
    "lab/evidence/checks.py::provenance_checks",
    "lab/host/procs.py::run",
    "lab/merge/combine.py::merge",
    "lab/merge/shards.py::check_shards",
    "lab/pipeline/run.py::_execute",
    "lab/reports/charts.py::perf_symbols_chart",
    "lab/reports/pdf_charts.py::draw",
    "lab/reports/pdf.py::_matrix",
    "lab/run/runner.py::_run_pass",
    "lab/run/runner.py::run_invocation",
    "lab/workloads/backup/contract.py::c3_destination",
    "lab/workloads/backup/scenario.py::load",
    "lab/workloads/backup/upload.py::receive_payload",
}

#: the layers, lowest first: a module imports only from its own layer or one below. A
#: module belongs to the layer of the longest prefix that names it ("lab" alone is exact).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("leaves", ("lab", "lab.errors", "lab.registry", "lab.host.tools", "lab.host.clock",
                "lab.host.digest", "lab.host.capabilities", "lab.intervals", "lab._start")),
    ("model", ("lab.model",)),
    ("host", ("lab.host", "lab.resources", "lab.schemas", "lab.container")),
    ("sandbox", ("lab.sandbox",)),
    ("observe", ("lab.collectors", "lab.host.doctor")),
    ("workloads", ("lab.workloads",)),
    ("judge, evidence, report", ("lab.judge", "lab.evidence", "lab.reports")),
    ("run", ("lab.run",)),
    ("pipeline", ("lab.pipeline",)),
    ("evaluate", ("lab.evaluate",)),
    ("campaign", ("lab.campaign",)),
    # a fixture task's machinery runs verification commands as the agent runs (the campaign's
    # jailed runner), evaluates and campaigns: above the campaign stage, below merge
    ("tasks", ("lab.workloads.verify", "lab.workloads.judge", "lab.workloads.calibrate",
               "lab.workloads.evaluate", "lab.workloads.campaign", "lab.workloads.evidence",
               "lab.workloads.cli", "lab.workloads.calcache")),
    ("merge", ("lab.merge",)),
    ("command line", ("lab._parser_types", "lab._parser", "lab._cli", "lab.__main__")),
)  # fmt: skip
#: the generic parts, which reach a workload only through lab.workloads (the seam)
GENERIC = ("lab.model", "lab.registry", "lab.host", "lab.schemas", "lab.container",
           "lab.sandbox", "lab.collectors", "lab.judge", "lab.evidence", "lab.reports")  # fmt: skip


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
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in modules().values()
    }
    long = {m: n for m, n in lengths.items() if n > LONG_MODULES.get(m, MAX_LINES)}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do): {long}"
    stale = {m: lengths.get(m) for m in LONG_MODULES if lengths.get(m, 0) <= MAX_LINES}
    assert not stale, f"LONG_MODULES names modules within the cap now (delete them): {stale}"


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the layer ``module`` belongs to."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            named = module == prefix or (prefix != "lab" and module.startswith(prefix + "."))
            if named and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer of LAYERS (add it)"
    return best[0]


def upward(edges: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(edges.items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]


def test_the_layer_check_finds_an_upward_import() -> None:
    assert layer_of("lab") == 0 and layer_of("lab.host.doctor") > layer_of("lab.host.procs")
    assert upward({"lab.model.run": {"lab.campaign.task"}}) == [
        "lab.model.run (model) imports lab.campaign.task (campaign)"
    ]
    assert upward({"lab.campaign.task": {"lab.model.run"}}) == []


def test_no_import_runs_up_the_layers() -> None:
    found = upward(graph())
    assert not found, "imports up the layers: " + "; ".join(found)


def test_generic_parts_know_no_workload() -> None:
    """The sandbox, collectors, judge machinery, reports and evidence (and everything below
    them) import no workload's package; the pipeline picks one through lab.workloads."""
    found = [
        f"{module} imports {target}"
        for module, targets in sorted(graph().items())
        if module.startswith(GENERIC)
        for target in sorted(targets)
        if target.startswith("lab.workloads.")
    ]
    assert not found, "generic parts importing a workload: " + "; ".join(found)


def long_functions(text: str) -> list[str]:
    """Functions longer than ``MAX_FUNCTION_LINES`` whose ``def`` line carries no comment
    saying why."""
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and "#" not in lines[node.lineno - 1]:
                found.append(node.name)
    return found


def test_the_function_check_reads_the_def_line() -> None:
    body = "\n".join(f"    x = {n}" for n in range(MAX_FUNCTION_LINES))
    text = f"def long():\n{body}\n\n\ndef why():  # one table, read in order\n{body}\n"
    assert long_functions(text) == ["long"]
    assert long_functions("def short():\n    return 1\n") == []


def test_no_function_is_longer_than_a_screen_unless_it_says_why() -> None:
    found = {
        f"{path.relative_to(ROOT)}::{name}"
        for path in modules().values()
        for name in long_functions(path.read_text())
    }
    assert not found - LONG_FUNCTIONS, (
        f"functions over {MAX_FUNCTION_LINES} lines (split them, or say why in a comment on "
        f"the def line): {sorted(found - LONG_FUNCTIONS)}"
    )
    assert not LONG_FUNCTIONS - found, (
        f"LONG_FUNCTIONS names functions that are short now (delete them from the list): "
        f"{sorted(LONG_FUNCTIONS - found)}"
    )


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
