"""What each observer really did: the probe's figures kept apart from the run's, and the
warning lines of the tools' stderr files found, whole, with the file they are in."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lab.run.tool_facts import observer_detail, warnings_in


def _results(artifacts: dict[str, list[str]], observed: dict[str, Any]) -> Any:
    inv = SimpleNamespace(artifacts=artifacts, observed=SimpleNamespace(to_dict=lambda: observed))
    return [SimpleNamespace(passes=[SimpleNamespace(invocations=[inv, inv])])]


def test_warning_lines_found_and_a_bare_error_joined() -> None:
    text = (
        "tcpdump: listening on any, link-type LINUX_SLL2\n"
        "ERROR: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace.\n"
        "Error:\nThe /run/x/perf.data data has no samples!\n"
        "0 packets dropped by kernel\n"
    )
    assert warnings_in(text) == [
        "ERROR: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace.",
        "Error: The /run/x/perf.data data has no samples!",
    ]


def test_bpftrace_detail_says_what_the_run_attached_and_warned(tmp_path: Path) -> None:
    session = tmp_path / "sessions" / "bpftrace-1"
    session.mkdir(parents=True)
    (session / "bpftrace.stderr.txt").write_text("ERROR: couldn't set RLIMIT_MEMLOCK\n")
    (tmp_path / "client.stderr").write_text("error: the client's own words\n")
    results = _results(
        {"bpftrace": ["sessions/bpftrace-1/bpftrace.stderr.txt", "inv1/bpftrace.txt"]},
        {"bpftrace": {"attached_probes": 12}},
    )
    detail = observer_detail("bpftrace", {"attached_probes": 10}, results, tmp_path)
    assert detail["probe_attached_probes"] == 10  # doctor's probe script
    assert detail["attached_probes"] == [12]  # "Attaching 12 probes" in the run
    assert detail["warnings"] == [
        "sessions/bpftrace-1/bpftrace.stderr.txt: ERROR: couldn't set RLIMIT_MEMLOCK"
    ]


def test_capture_interface_is_the_one_tcpdump_listened_on(tmp_path: Path) -> None:
    results = _results({}, {"packets": {"interface": "any"}})
    detail = observer_detail("packets", {"interface": "lo"}, results, tmp_path)
    assert (detail["probe_interface"], detail["interface"]) == ("lo", ["any"])
    assert detail["warnings"] == []
