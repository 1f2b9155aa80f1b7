"""The bpftrace probe script made ready for one binary and one pass: ``probes/client.bt``
with ``__BINARY__`` replaced by the client's path, ``__CGROUPS__`` by the filter on the pass's
invocation cgroups, and the uprobe block of every function the binary lacks removed (bpftrace
refuses to start when a uprobe cannot attach). Pure text: nothing here runs a process.

    present = function_symbols(Path("bpftrace.symbols.txt").read_text())   # nm's listing
    rendered = render_script(DEFAULT_SCRIPT.read_text(), "/opt/client", present,
                             cgroup_filter([Path("/sys/fs/cgroup/lab/inv1")]))
    rendered.text                       # the script bpftrace runs (bpftrace.bt)
    rendered.absent_symbols             # ("busy_wait",): its counter is omitted, never 0
    defined_counters(rendered.text)     # ["@connects", "@hash_calls", ...]
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab import resources
from lab.errors import CollectorError

PROBES_DIR = resources.probes_dir()
DEFAULT_SCRIPT = PROBES_DIR / "client.bt"
PLACEHOLDER = "__BINARY__"
CGROUPS_PLACEHOLDER = "__CGROUPS__"

#: the client functions the script may attach uprobes to, and the map each one feeds
UPROBE_COUNTERS: dict[str, str] = {
    "hash_file": "@hash_calls",
    "send_payload": "@send_payload_calls",
    "busy_wait": "@busy_wait_calls",
}

_UPROBE_LINE = re.compile(rf"^uprobe:{PLACEHOLDER}:(?P<name>\w+)")
_RENDERED_UPROBE = re.compile(r"^uprobe:[^:\s]+:(?P<name>\w+)", re.MULTILINE)
_COUNTER_DEF = re.compile(r"(@\w+)(?:\[[^\]]*\])?\s*=\s*(?:count|sum)\(")
_NM_FUNCTION_TYPES = frozenset("TtWwi")


@dataclass(frozen=True)
class RenderedScript:
    """A probe script ready to run against one binary."""

    text: str
    uprobes: tuple[str, ...]
    absent_symbols: tuple[str, ...]


def template_uprobes(template: str) -> list[str]:
    """The functions the template has ``uprobe:__BINARY__:NAME`` blocks for."""
    return [m.group("name") for m in map(_UPROBE_LINE.match, template.splitlines()) if m]


def cgroup_filter(paths: Sequence[Path]) -> str:
    """The probe predicate matching the given cgroup v2 directories."""
    for path in paths:
        if '"' in str(path) or "\\" in str(path):
            raise CollectorError(f"the cgroup path {path} cannot be written in a bpftrace string.")
    return "(" + " || ".join(f'cgroup == cgroupid("{p}")' for p in paths) + ")"


def render_script(
    template: str, binary: str, present_symbols: Collection[str], filter_expr: str
) -> RenderedScript:
    """Substitute the binary's path and the cgroup filter, and drop the uprobe block (its
    first line to the next line that is exactly ``}``) of every function
    ``present_symbols`` lacks."""
    kept: list[str] = []
    uprobes: list[str] = []
    absent: list[str] = []
    skipping = False
    for line in template.splitlines():
        if skipping:
            skipping = line.rstrip() != "}"
            continue
        m = _UPROBE_LINE.match(line)
        if m is not None:
            if m.group("name") in present_symbols:
                uprobes.append(m.group("name"))
            else:
                absent.append(m.group("name"))
                skipping = line.rstrip() != "}"
                continue
        if line.lstrip().startswith("//"):
            kept.append(line)  # comments keep the placeholders: they describe the template
        else:
            kept.append(line.replace(PLACEHOLDER, binary).replace(CGROUPS_PLACEHOLDER, filter_expr))
    header = [f"// lab: client binary {binary}", f"// lab: filter {filter_expr}"]
    if absent:
        header.append(
            "// lab: uprobes removed because the binary has no such symbol: " + ", ".join(absent)
        )
    text = "\n".join(header + kept) + "\n"
    return RenderedScript(text, tuple(uprobes), tuple(absent))


def script_uprobes(script: str) -> list[str]:
    """The functions a rendered script attaches uprobes to."""
    return [m.group("name") for m in _RENDERED_UPROBE.finditer(script)]


def defined_counters(script: str) -> list[str]:
    """Maps the script fills with ``count()`` or ``sum()``, sorted."""
    return sorted(set(_COUNTER_DEF.findall(script)))


def function_symbols(nm_output: str) -> set[str]:
    """Defined function names in ``nm --defined-only`` output (versions stripped)."""
    names: set[str] = set()
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[-2] in _NM_FUNCTION_TYPES:
            names.add(parts[-1].split("@", 1)[0])
    return names


def check_attach_path(binary: str) -> None:
    """An attach point is ``uprobe:PATH:FUNCTION``: refuse paths bpftrace cannot parse."""
    if not binary or any(c.isspace() for c in binary) or ":" in binary:
        raise CollectorError(
            f"bpftrace cannot attach uprobes to {binary!r}: the path is empty or contains "
            "whitespace or ':', which separate the parts of an attach point."
        )
