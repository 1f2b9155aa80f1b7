"""One timeline on a real run: every row on CLOCK_MONOTONIC, sorted, each source's own
timestamp kept beside it and traceable to its raw file, and the order of one invocation
as every observer saw it: client start < its first syscall < its SYN < the receiver's
accept < its claim < the verifier's check. And every figure from its own pass: the figures
report.md prints (each pass's decoy port, the capture's interface, the probes bpftrace
attached, the tools' warnings, packet counts) against results.json and the raw files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from lab.collectors.packets_pcap import read_pcap
from lab.host.doctor import check
from lab.pipeline import RunOutcome, RunRequest, execute
from tests.conftest import require

pytestmark = pytest.mark.integration

SOURCES = {
    "client",
    "runner",
    "receiver",
    "decoy",
    "verifier",
    "strace",
    "bpftrace",
    "perf",
    "packets",
}


@pytest.fixture(scope="module")
def run(client: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunOutcome, Path]:
    observers = check(mount=True).observers
    for name in ("strace", "bpftrace", "perf", "packets"):
        require(name, observers[name].available, observers[name].reason)
    out = tmp_path_factory.mktemp("timeline")
    os.environ.pop("LAB_SIGNING_KEY", None)
    outcome = execute(
        RunRequest(
            names=["baseline", "unexpected-egress"],
            collector="all",
            packets="required",
            out=out,
            client=client,
            archive=False,
        ),
        say=lambda _m: None,
    )
    return outcome, outcome.run_dir


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    text = (run_dir / "timeline.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_every_row_on_one_named_time_base(run: tuple[RunOutcome, Path]) -> None:
    outcome, run_dir = run
    rows = rows_of(run_dir)
    head = rows[0]
    assert head["event"] == "time-base" and head["time_base"] == "CLOCK_MONOTONIC"
    assert 0 <= head["uncertainty_ns"] < 1_000_000
    named = outcome.result.environment["time_base"]
    assert named["time_base"] == "CLOCK_MONOTONIC"
    assert named["realtime_offset"] == head["realtime_offset"]
    for row in rows:
        assert isinstance(row["t_ns"], int) and row["source"] in SOURCES, row
        assert isinstance(row["event"], str) and row["event"], row
    assert [r["t_ns"] for r in rows] == sorted(r["t_ns"] for r in rows)
    for row in rows[1:]:
        assert {"scenario", "repetition", "pass", "invocation"} <= row.keys(), row
    found = {r["source"] for r in rows}
    assert {"client", "runner", "receiver", "verifier", "strace", "bpftrace", "packets"} <= found
    assert "perf" in found


def test_perf_sample_window_lies_inside_its_invocation(run: tuple[RunOutcome, Path]) -> None:
    _, run_dir = run
    for index in (1, 2):
        rows = [
            r for r in rows_of(run_dir) if r.get("pass") == "perf" and r.get("invocation") == index
        ]
        start = _first(rows, "runner", "client-start")["t_ns"]
        first = _first(rows, "perf", "first-sample")["t_ns"]
        last = _first(rows, "perf", "last-sample")["t_ns"]
        exited = _first(rows, "client", "exit")["t_ns"]
        assert start < first <= last < exited


def _first(rows: list[dict[str, Any]], source: str, event: str) -> dict[str, Any]:
    return next(r for r in rows if r["source"] == source and r["event"] == event)


@pytest.mark.parametrize(("collector", "syscall"), [("strace", "execve"), ("bpftrace", None)])
def test_one_invocation_in_causal_order(
    run: tuple[RunOutcome, Path], collector: str, syscall: str | None
) -> None:
    _, run_dir = run
    rows = [r for r in rows_of(run_dir) if r.get("pass") == collector and r.get("invocation") == 1]
    start = _first(rows, "runner", "client-start")
    kernel = [r for r in rows if r["source"] == collector]
    first_call = kernel[0] if syscall is None else _first(rows, collector, syscall)
    syn = _first(rows, "packets", "SYN")
    accept = _first(rows, "receiver", "connect")
    complete = next(
        r for r in rows if r["source"] == "client" and r["claim"].get("event") == "complete"
    )
    verified = _first(rows, "verifier", "check")
    order = [start, first_call, syn, accept, complete, verified]
    assert [r["t_ns"] for r in order] == sorted(r["t_ns"] for r in order), [
        (r["source"], r["event"], r["t_ns"]) for r in order
    ]
    assert len({r["t_ns"] for r in order}) == len(order)


def test_claims_are_stamped_as_read_not_at_exit(run: tuple[RunOutcome, Path]) -> None:
    _, run_dir = run
    rows = [r for r in rows_of(run_dir) if r.get("pass") == "none" and r.get("invocation") == 1]
    claims = [r for r in rows if r["source"] == "client" and r["event"] == "claim"]
    assert len(claims) >= 3
    started = next(r for r in claims if r["claim"].get("event") == "start")
    payload = _first(rows, "receiver", "payload")
    exited = _first(rows, "client", "exit")
    # the client said "start" before it sent anything, and the lab read it then, not at
    # exit: before the receiver had the upload's bytes. (Not before the receiver's accept:
    # the line is stamped once the lab's reader thread has it, which on a loaded machine
    # can be a few ms, one interpreter switch interval, after the client connected.)
    assert started["t_ns"] < payload["t_ns"] < exited["t_ns"]


def test_each_sources_own_time_is_kept_and_traceable(run: tuple[RunOutcome, Path]) -> None:
    _, run_dir = run
    rows = rows_of(run_dir)
    base = run_dir / "baseline" / "r1"
    strace_text = (base / "strace" / "inv1" / "strace.txt").read_text()
    bpf_text = (base / "bpftrace" / "inv1" / "bpftrace.txt").read_text()
    _, packets = read_pcap((base / "none" / "inv1" / "capture.pcap").read_bytes())
    stamps = {f"{p.ts:.6f}" for p in packets}
    for row in rows[1:]:
        inv1 = row.get("invocation") == 1 and row.get("scenario") == "baseline"
        if row["source"] == "strace" and inv1 and row["pass"] == "strace":
            assert f" {row['source_time']} {row['call']}(" in strace_text
            assert row["t_ns"] == int(row["source_time"].replace(".", "")) * 1000 - row["offset_ns"]
        if row["source"] == "bpftrace" and inv1 and "summarised" not in row:
            assert f"{row['source_time']} cg=" in bpf_text and row["t_ns"] == int(
                row["source_time"]
            )
        if row["source"] == "packets" and inv1 and row["pass"] == "none":
            assert row["source_time"] in stamps
            assert "offset_ns" in row


def _report(run_dir: Path) -> str:
    return (run_dir / "report.md").read_text(encoding="utf-8")


def test_c3_reason_names_each_pass_with_its_own_decoy(run: tuple[RunOutcome, Path]) -> None:
    outcome, run_dir = run
    egress = next(s for s in outcome.result.scenarios if s.name == "unexpected-egress")
    reason = egress.verdicts["C3"].reason
    report = _report(run_dir)
    assert reason in report
    parts = reason.split("; ")
    decoys = set()
    for p in egress.passes:
        raw = (run_dir / "unexpected-egress" / "r1" / p.collector / "decoy.jsonl").read_text()
        records = [json.loads(line) for line in raw.splitlines()]
        listening = records[0]
        assert listening["event"] == "listening" and listening["address"] == p.decoy_address
        peers = [r["peer"] for r in records if r["event"] == "connect"]
        # that pass's own decoy, named with that pass: the one part that names the pass holds
        # its decoy's address and a peer its own decoy recorded. The address alone cannot
        # tell the parts apart: each pass's network namespace hands out its own ports, and
        # two passes' decoys have had the same one (a CI run: 127.0.0.1:43325 twice)
        said = [part for part in parts if part.endswith(f"(pass: {p.collector})")]
        assert len(said) == 1 and p.decoy_address in said[0], (p.collector, parts)
        assert peers and any(peer in said[0] for peer in peers), (p.collector, said, peers)
        decoys.add((listening["address"], listening["mono_ns"]))
    assert len(decoys) == len(egress.passes)  # each pass had a decoy of its own


def _detail(row: str) -> dict[str, str]:
    """The observers table's detail cell, ``key: value; key: value``, as a dict."""
    cell = row.split(" | ")[2]
    return dict(item.split(": ", 1) for item in re.split(r"; (?=\w+: )", cell))


def test_observers_say_what_each_tool_really_did(run: tuple[RunOutcome, Path]) -> None:
    outcome, run_dir = run
    report = _report(run_dir)
    packets = outcome.result.observers["packets"].detail
    for stderr in run_dir.glob("*/r1/*/tcpdump.stderr.txt"):
        assert "listening on any," in stderr.read_text()
    assert packets["interface"] == ["any"]
    bpf = outcome.result.observers["bpftrace"].detail
    session = next(run_dir.glob("sessions/bpftrace-*"))
    said = re.search(r"^Attaching (\d+) probes", (session / "bpftrace.txt").read_text(), re.M)
    assert said is not None and bpf["attached_probes"] == [int(said.group(1))]
    packets_row = next(line for line in report.splitlines() if line.startswith("| packets |"))
    bpf_row = next(line for line in report.splitlines() if line.startswith("| bpftrace |"))
    assert _detail(packets_row)["interface"] == "any"
    assert _detail(packets_row)["probe_interface"] == "lo"  # doctor's probe, named as such
    assert _detail(bpf_row)["attached_probes"] == said.group(1)
    stderr = (session / "bpftrace.stderr.txt").read_text()
    memlock = [line for line in stderr.splitlines() if "RLIMIT_MEMLOCK" in line]
    warned = [w for w in bpf["warnings"] if "RLIMIT_MEMLOCK" in w]
    assert len(warned) == len(memlock)
    if memlock:
        assert "RLIMIT_MEMLOCK" in bpf_row


def test_packet_counts_match_each_invocations_capture(run: tuple[RunOutcome, Path]) -> None:
    outcome, run_dir = run
    for s in outcome.result.scenarios:
        for p in s.passes:
            for inv in p.invocations:
                pcap = run_dir / s.name / "r1" / p.collector / f"inv{inv.index}" / "capture.pcap"
                _, packets = read_pcap(pcap.read_bytes())
                summary = inv.observed.to_dict()["packets"]
                assert summary["packets"] == len(packets), (s.name, p.collector, inv.index)
