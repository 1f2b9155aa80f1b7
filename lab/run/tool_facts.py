"""What each observer really did in this run, beside what ``doctor``'s probe found: the
interface tcpdump listened on (``any`` inside each pass's network namespace, where the probe
tried ``lo``), the probes bpftrace reported attaching ("Attaching N probes", where the probe
script attached fewer), and every warning or error line the tools wrote on their stderr
(bpftrace's "couldn't set RLIMIT_MEMLOCK", perf's "has no samples!", …) as a finding with the
file it is in.

    observer_detail("packets", probe_detail, scenario_results, run_dir)
    # {"probe_interface": "lo", "interface": ["any"], "warnings": [...], ...}
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lab.model import ScenarioResult

#: probe figures renamed so that they are never read as the run's own
PROBE_KEYS = {"interface": "probe_interface", "attached_probes": "probe_attached_probes"}
#: a tool's stderr line that warns or reports an error
WARNING = re.compile(r"\b(?:error|warning|couldn't|could not|cannot|failed)\b", re.IGNORECASE)
#: warning lines kept per observer (the files hold them all)
WARNINGS_KEPT = 20
#: the tools' own stderr files in the evidence (never the client's)
CLIENT_STDERR = "client.stderr"


def _stderr_files(name: str, results: list[ScenarioResult]) -> list[str]:
    files: set[str] = set()
    for result in results:
        for p in result.passes:
            for inv in p.invocations:
                for rel in inv.artifacts.get(name, []):
                    if "stderr" in Path(rel).name and Path(rel).name != CLIENT_STDERR:
                        files.add(rel)
    return sorted(files)


def warnings_in(text: str) -> list[str]:
    """The warning lines of a tool's stderr, each whole; a bare "Error:" line is joined
    with the line that says what the error is."""
    lines = [line.strip() for line in text.splitlines()]
    found: list[str] = []
    for i, line in enumerate(lines):
        if not WARNING.search(line):
            continue
        if line.rstrip(":").lower() in ("error", "warning") and i + 1 < len(lines):
            line = f"{line} {lines[i + 1]}"
        found.append(line)
    return found


def tool_warnings(name: str, results: list[ScenarioResult], run_dir: Path) -> list[str]:
    """``<file>: <line>`` for every warning line of observer ``name``'s stderr files,
    the same line in several files once with how many files hold it."""
    seen: dict[str, list[str]] = {}
    for rel in _stderr_files(name, results):
        path = run_dir / rel
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in warnings_in(text):
            # the run directory's path inside a message is not part of the finding
            seen.setdefault(line.replace(str(run_dir) + "/", ""), []).append(rel)
    out: list[str] = []
    for line, where in list(seen.items())[:WARNINGS_KEPT]:
        more = f" (and {len(where) - 1} more file(s))" if len(where) > 1 else ""
        out.append(f"{where[0]}{more}: {line}")
    if len(seen) > WARNINGS_KEPT:
        out.append(f"{len(seen) - WARNINGS_KEPT} more distinct warning line(s) in those files")
    return out


def _observed_values(name: str, key: str, results: list[ScenarioResult]) -> list[Any]:
    values: set[Any] = set()
    for result in results:
        for p in result.passes:
            for inv in p.invocations:
                record = inv.observed.to_dict().get(name)
                if isinstance(record, dict) and record.get(key) is not None:
                    values.add(record[key])
    return sorted(values, key=str)


def observer_detail(
    name: str, probe: dict[str, Any], results: list[ScenarioResult], run_dir: Path | None
) -> dict[str, Any]:
    """The observers table's detail for ``name``: the probe's figures under ``probe_*``
    names, then what the tool did in this run's invocations."""
    detail = {PROBE_KEYS.get(k, k): v for k, v in probe.items()}
    if name == "packets":
        detail["interface"] = _observed_values("packets", "interface", results) or None
    if name == "bpftrace":
        found = _observed_values("bpftrace", "attached_probes", results)
        detail["attached_probes"] = found or None
    if run_dir is not None:
        detail["warnings"] = tool_warnings(name, results, run_dir)
    return detail
