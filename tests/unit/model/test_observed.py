"""lab.model.observed: each observer's typed summary writes exactly its results.json record
and reads it back; a figure that was not observed stays absent (with its reason), never 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.model.observed import (
    DESCRIPTOR_KEYS,
    BpftraceSummary,
    Observed,
    PacketFlow,
    PacketSummary,
    PerfSummary,
    PerfSymbol,
    StraceSummary,
)

RX = "127.0.0.1:40001"

STRACE = StraceSummary(
    connects=2,
    destinations=(RX,),
    syscalls=412,
    processes=1,
    exit_status=0,
    undecodable=("io_uring (io_uring_enter)",),
    sandbox_syscalls=1400,
    source_bytes_read=262_144,
    source_reads=5,
    sent_bytes=262_300,
)
BPFTRACE = BpftraceSummary(
    hash_calls=1,
    connects=2,
    read_bytes=540_129,
    sent_bytes=524_437,
    switches_out=3,
    destinations=(RX,),
    maps={"@connects": "2", "@hash_calls": "1"},
    absent_symbols=("busy_wait",),
    unprinted_maps=("@send_payload_calls",),
    function_entries={"hash_file": 1},
    uring_ops={"SENDMSG": 1},
    attached_probes=18,
    lost_events=0,
    cgroup_id=6238,
)
PERF = PerfSummary(
    event="cpu-clock",
    event_reason="test: software event",
    samples=421,
    lost_samples=0,
    lost_chunks=0,
    event_count=421_421_421,
    top_symbols=(PerfSymbol("busy_wait", "backup-client", 97.5, 96.0),),
    top_client_symbol="busy_wait",
    top_client_inclusive_pct=97.5,
)
PACKETS = PacketSummary(
    packets=19,
    payload_bytes_to_receiver=3000,
    connections_to_receiver=1,
    flows=(PacketFlow(40001, "receiver", "to", 10, 3000),),
    destinations=(RX,),
    first_packet_at=1_795_968_601.894885,
    last_packet_at=1_795_968_601.895538,
    captured=19,
    received_by_filter=38,
    dropped_by_kernel=0,
    link_type=113,
    interface="any",
    namespace=True,
)


def _schema(repo_root: Path, name: str) -> dict[str, Any]:
    schema = json.loads((repo_root / "lab" / "schemas" / "results.schema.json").read_text())
    invocation = schema["properties"]["scenarios"]["items"]["properties"]["invocations"]
    observed: dict[str, Any] = invocation["items"]["properties"]["observed"]["properties"]
    return observed[name] if name else observed


@pytest.mark.parametrize("summary", [STRACE, BPFTRACE, PERF, PACKETS], ids=lambda s: s.observer)
def test_each_summary_round_trips_through_its_record(
    repo_root: Path, summary: StraceSummary | BpftraceSummary | PerfSummary | PacketSummary
) -> None:
    import jsonschema

    record = json.loads(json.dumps(summary.to_dict()))
    assert type(summary).from_dict(record) == summary
    assert type(summary).from_dict(record).to_dict() == record
    jsonschema.validate(record, _schema(repo_root, summary.observer))


def test_observed_holds_one_summary_per_observer_in_record_order() -> None:
    observed = Observed()
    assert not observed and observed.names() == [] and observed.to_dict() == {}
    for summary in (PACKETS, STRACE, PERF, BPFTRACE):
        observed.add(summary)
    assert observed.names() == ["bpftrace", "packets", "perf", "strace"]
    assert list(observed.to_dict()) == observed.names()
    assert observed.get("strace") is STRACE and observed.get("client") is None
    assert "perf" in observed and "receiver" not in observed
    assert Observed.from_dict(json.loads(json.dumps(observed.to_dict()))) == observed


def test_merged_keeps_the_first_pass_summary_of_each_observer() -> None:
    later = Observed(strace=StraceSummary(connects=9), packets=PACKETS)
    merged = Observed(strace=STRACE).merged(later)
    assert merged.strace is STRACE and merged.packets is PACKETS and merged.perf is None


def test_an_unknown_observer_or_a_malformed_record_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown observer"):
        Observed.from_dict({"tcpflow": {}})
    with pytest.raises(ValueError, match="not an object"):
        Observed.from_dict({"strace": []})
    record = STRACE.to_dict() | {"connects": "2"}
    with pytest.raises(ValueError, match="connects"):
        StraceSummary.from_dict(record)


def test_strace_figures_not_observed_stay_absent_not_zero(repo_root: Path) -> None:
    import jsonschema

    why = "strace printed 3 of the client's descriptors without their paths"
    blind = StraceSummary(
        connects=2,
        destinations=(RX,),
        **dict.fromkeys(DESCRIPTOR_KEYS, None),
        unobserved=dict.fromkeys(DESCRIPTOR_KEYS, why),
    )
    record = blind.to_dict()
    for key in DESCRIPTOR_KEYS:
        assert key not in record and record["unobserved"][key] == why
    back = StraceSummary.from_dict(record)
    assert back == blind and back.source_bytes_read is None
    jsonschema.validate(record, _schema(repo_root, "strace"))
    # observed zeros stay zeros, with no "unobserved" at all
    zero = StraceSummary.from_dict(StraceSummary().to_dict())
    assert zero.source_bytes_read == 0 and "unobserved" not in StraceSummary().to_dict()


def test_a_strace_figure_cannot_be_both_a_number_and_not_observed() -> None:
    with pytest.raises(ValueError, match="both observed and not observed"):
        StraceSummary(source_bytes_read=0, unobserved={"source_bytes_read": "no -yy"})


def test_a_bpftrace_counter_without_its_probe_is_absent_not_zero() -> None:
    record = BPFTRACE.to_dict()
    assert "busy_wait_calls" not in record and "send_payload_calls" not in record
    assert record["hash_calls"] == 1
    back = BpftraceSummary.from_dict(record)
    assert back.busy_wait_calls is None and back.counter("hash_calls") == 1
