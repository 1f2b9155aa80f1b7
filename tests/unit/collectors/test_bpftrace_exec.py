"""The exec trace of a cgroup parsed: a real bpftrace 0.17 output (``ls`` failing with
status 2, ``sh -c 'exit 3'``, ``sleep``) and the nasty cases written by hand."""

from __future__ import annotations

from pathlib import Path

from lab.collectors.bpftrace_exec import SCRIPT, parse_exec_trace


def test_a_real_trace(assets: Path) -> None:
    execs = parse_exec_trace((assets / "bpftrace" / "exec-trace.txt").read_text())
    assert [e.path for e in execs] == ["/usr/bin/ls", "/usr/bin/sh", "/usr/bin/sleep"]
    assert execs[0].argv == ["ls", "/nonexist", "a b"]  # a word with a space kept whole
    assert [e.exit_status for e in execs] == [2, 3, 0]
    assert all(e.parent == 15542 for e in execs)
    assert execs[2].end_ns is not None and execs[2].end_ns - execs[2].start_ns > 100_000_000


def test_a_path_search_an_exec_chain_a_signal_and_a_survivor() -> None:
    text = "\n".join(
        [
            "Attaching 5 probes...",
            "ARGV 10 make\t-C\tnative",  # sh tries /usr/local/bin/make: fails, no EXEC
            "ARGV 10 make\t-C\tnative",
            "EXEC 1000 10 9 /usr/bin/make",
            "ARGV 10 cc\t-c\tx.c",  # make execs cc in place (no fork)
            "EXEC 2000 10 9 /usr/bin/cc",
            "EXIT 3000 10 9",  # killed by SIGKILL
            "EXEC 4000 11 9 /usr/bin/sleep",  # no ARGV seen: the path stands in
        ]
    )
    make, cc, sleep = parse_exec_trace(text)
    assert make.argv == ["make", "-C", "native"] and make.end_ns == 2000
    assert make.exit_status is None and make.signal is None  # its image was replaced
    assert cc.signal == 9 and cc.exit_status is None and cc.end_ns == 3000
    assert sleep.argv == ["/usr/bin/sleep"] and sleep.end_ns is None


def test_the_script_filters_every_probe_by_cgroup() -> None:
    probes = [line for line in SCRIPT.splitlines() if line.startswith("tracepoint:")]
    assert len(probes) == 3 and all("__FILTER__" in line for line in probes)
