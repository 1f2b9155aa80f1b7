"""The packet collector's parsers, on pcaps captured here with tcpdump 4.99 on loopback.

Each fixture (tests/assets/packets/<name>.pcap + <name>.stderr.txt) holds one exchange:
3000 payload bytes to the receiver port 40111 (answer "OK\\n", 3 bytes), 11 TCP payload
bytes to the decoy port 40112 (no answer), then one 5-byte UDP datagram to the decoy port.
All were taken with the collector's snap length (512 bytes), so the 3000-byte segment is
cut in the file and its payload size must come from the IP header. ``lo-en10mb`` is
``tcpdump -i lo``; ``any-sll2`` is ``-i any`` (Linux cooked v2); ``any-sll`` is
``-i any -y LINUX_SLL``. ``full-snaplen-drops.stderr.txt`` is tcpdump's report of a full
snap-length capture of five 512 KiB uploads, which overflowed the ring buffer.
``retransmission`` is a 512 KiB upload to port 47415 and 11 bytes to port 55695 captured by
the collector on a loaded machine: TCP re-sent 14,875 bytes (a tail-loss probe).
"""

from __future__ import annotations

import io
import shutil
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import dpkt
import pytest

from lab.collectors.base import PassContext, Window
from lab.collectors.packets import PacketCapture, capture_filter, capture_wanted, parse_counters
from lab.collectors.packets_pcap import (
    DLT_EN10MB,
    DLT_LINUX_SLL,
    DLT_LINUX_SLL2,
    DLT_NULL,
    Packet,
    read_pcap,
    summarize_packets,
    write_pcap,
)
from lab.errors import CollectorError
from lab.host.procs import CommandLog, Completed
from lab.model import ObserverStatus

R, D = 40111, 40112


def _pcap(assets: Path, name: str) -> bytes:
    return (assets / "packets" / f"{name}.pcap").read_bytes()


@pytest.mark.parametrize(
    ("name", "dlt", "packets", "to_receiver_packets"),
    [
        ("lo-en10mb", DLT_EN10MB, 19, 6),
        ("any-sll", DLT_LINUX_SLL, 19, 6),
        ("any-sll2", DLT_LINUX_SLL2, 19, 6),
    ],
)
def test_payload_bytes_per_port_and_direction(
    assets: Path, name: str, dlt: int, packets: int, to_receiver_packets: int
) -> None:
    link, parsed = read_pcap(_pcap(assets, name))
    assert link == dlt
    s = summarize_packets(parsed, R, D).to_dict()
    assert s["packets"] == packets
    assert s["payload_bytes_to_receiver"] == 3000
    assert s["payload_bytes_from_receiver"] == 3
    assert s["payload_bytes_to_decoy"] == 11 + 5
    assert s["payload_bytes_from_decoy"] == 0
    assert s["connections_to_receiver"] == 1
    assert s["connections_to_decoy"] == 1
    assert s["destinations"] == ["127.0.0.1:40111", "127.0.0.1:40112"]
    assert s["retransmitted_bytes"] == 0
    to_receiver = next(f for f in s["flows"] if f["port"] == R and f["direction"] == "to")
    assert to_receiver == {
        "port": R,
        "role": "receiver",
        "direction": "to",
        "packets": to_receiver_packets,
        "payload_bytes": 3000,
    }


def _rewrite(data: bytes, linktype: int, frame: Callable[[bytes], bytes]) -> bytes:
    out = io.BytesIO()
    writer = dpkt.pcap.Writer(out, linktype=linktype)
    for ts, buf in dpkt.pcap.Reader(io.BytesIO(data)):
        writer.writepkt(frame(buf), ts=ts)
    return out.getvalue()


def test_dlt_null_is_parsed(assets: Path) -> None:
    # BSD loopback framing: a 4-byte host-order address family instead of Ethernet.
    null = _rewrite(
        _pcap(assets, "lo-en10mb"),
        DLT_NULL,
        lambda buf: struct.pack("=I", socket.AF_INET) + buf[14:],
    )
    link, parsed = read_pcap(null)
    assert link == DLT_NULL
    s = summarize_packets(parsed, R, D).to_dict()
    assert (s["packets"], s["payload_bytes_to_receiver"], s["payload_bytes_to_decoy"]) == (
        19,
        3000,
        16,
    )


def test_payload_comes_from_headers_not_captured_bytes(assets: Path) -> None:
    frames = list(dpkt.pcap.Reader(io.BytesIO(_pcap(assets, "lo-en10mb"))))
    assert max(len(buf) for _, buf in frames) == 512  # the 3000-byte segment was cut
    _, parsed = read_pcap(_pcap(assets, "lo-en10mb"))
    assert max(p.payload for p in parsed) == 3000


def test_retransmitted_segment_is_counted_once(assets: Path) -> None:
    data = _pcap(assets, "lo-en10mb")
    frames = list(dpkt.pcap.Reader(io.BytesIO(data)))
    out = io.BytesIO()
    writer = dpkt.pcap.Writer(out, linktype=DLT_EN10MB)
    for ts, buf in frames:
        writer.writepkt(buf, ts=ts)
        ip = dpkt.ethernet.Ethernet(buf).data
        if isinstance(ip.data, dpkt.tcp.TCP) and ip.len - 20 - ip.data.off * 4 == 3000:
            writer.writepkt(buf, ts=ts + 0.2)  # the same segment again
    _, parsed = read_pcap(out.getvalue())
    s = summarize_packets(parsed, R, D).to_dict()
    assert s["packets"] == 20
    assert s["retransmitted_bytes"] == 3000
    assert s["payload_bytes_to_receiver"] == 3000


def test_real_retransmission_is_counted_once(assets: Path) -> None:
    _, parsed = read_pcap(_pcap(assets, "retransmission"))
    s = summarize_packets(parsed, 47415, 55695).to_dict()
    assert s["payload_bytes_to_receiver"] == 524_288
    assert s["retransmitted_bytes"] == 14_875
    assert s["payload_bytes_to_decoy"] == 11
    assert s["packets"] == 37
    counters = parse_counters((assets / "packets" / "retransmission.stderr.txt").read_text())
    assert (counters["captured"], counters["dropped_by_kernel"]) == (37, 0)


def _segment(seq: int, payload: int, flags: str = "P.", sport: int = 50000) -> Packet:
    return Packet(
        ts=float(seq),
        proto="tcp",
        src="127.0.0.1",
        sport=sport,
        dst="127.0.0.1",
        dport=R,
        flags=flags,
        syn="S" in flags,
        ack="." in flags,
        seq=seq,
        payload=payload,
    )


def test_retransmission_cut_differently_is_counted_once() -> None:
    # Sequence numbers wrap: the SYN is 10 below 2**32.
    isn = 2**32 - 10
    packets = [
        _segment(isn, 0, "S"),
        _segment(isn + 1, 1000),  # bytes 0..1000
        _segment(isn + 1001, 1000),  # bytes 1000..2000 (seq wrapped past 2**32)
        _segment(isn + 501, 2000),  # bytes 500..2500 again, re-cut: 500 new bytes
        _segment(isn + 3001, 500),  # bytes 3000..3500, after a gap
        _segment(isn + 2501, 500),  # bytes 2500..3000 fill the gap
    ]
    packets = [
        p if p.seq < 2**32 else Packet(**{**p.__dict__, "seq": p.seq - 2**32}) for p in packets
    ]
    s = summarize_packets(packets, R, D).to_dict()
    assert s["payload_bytes_to_receiver"] == 3500
    assert s["retransmitted_bytes"] == 1500
    # A new connection from the same port starts a new sequence space.
    again = [*packets, _segment(7, 0, "S"), _segment(8, 1000)]
    s = summarize_packets(again, R, D).to_dict()
    assert s["payload_bytes_to_receiver"] == 4500
    assert s["connections_to_receiver"] == 2


def test_ipv6_destination_is_bracketed() -> None:
    tcp = dpkt.tcp.TCP(sport=50000, dport=R, flags=dpkt.tcp.TH_SYN, seq=1)
    ip6 = dpkt.ip6.IP6(
        src=socket.inet_pton(socket.AF_INET6, "::1"),
        dst=socket.inet_pton(socket.AF_INET6, "::1"),
        nxt=dpkt.ip.IP_PROTO_TCP,
        hlim=64,
        data=tcp,
        plen=len(bytes(tcp)),
    )
    eth = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP6, data=ip6)
    out = io.BytesIO()
    dpkt.pcap.Writer(out, linktype=DLT_EN10MB).writepkt(bytes(eth), ts=1.0)
    _, parsed = read_pcap(out.getvalue())
    s = summarize_packets(parsed, R, D).to_dict()
    assert s["destinations"] == ["[::1]:40111"]
    assert s["connections_to_receiver"] == 1


def test_counters_from_tcpdump_stderr(assets: Path) -> None:
    text = (assets / "packets" / "full-snaplen-drops.stderr.txt").read_text()
    assert parse_counters(text) == {
        "captured": 128,
        "received_by_filter": 284,
        "dropped_by_kernel": 28,
        "dropped_by_interface": None,
    }
    singular = "1 packet captured\n1 packet received by filter\n0 packets dropped by kernel\n"
    singular += "3 packets dropped by interface\n"
    assert parse_counters(singular) == {
        "captured": 1,
        "received_by_filter": 1,
        "dropped_by_kernel": 0,
        "dropped_by_interface": 3,
    }


def _ctx(tmp_path: Path, windows: list[tuple[float, float]] | None = None) -> PassContext:
    spans = windows or [(0.0, float("inf"))]
    return PassContext(
        run_dir=tmp_path,
        out_dir=tmp_path / "pass",
        client_path=tmp_path / "client",
        source_path=tmp_path / "source.bin",
        receiver_address=("127.0.0.1", R),
        decoy_address=("127.0.0.1", D),
        log=CommandLog(tmp_path / "commands.jsonl", root=tmp_path),
        netns_argv=["nsenter", "--net=/run/netns/x", "--"],
        windows=[
            Window(i, tmp_path / "pass" / f"inv{i}", None, None, start, end)
            for i, (start, end) in enumerate(spans, start=1)
        ],
    )


def _completed(status: int | None = 0, signal: int | None = None) -> Completed:
    return Completed(
        argv=["tcpdump"],
        purpose="test",
        exit_status=status,
        duration_s=1.0,
        stdout_path=None,
        stderr_path=None,
        started_at=0.0,
        killed_by_signal=signal,
    )


def _kept(assets: Path, ctx: PassContext, name: str = "lo-en10mb") -> None:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(assets / "packets" / f"{name}.pcap", ctx.out_dir / "capture.pcap")
    shutil.copy(assets / "packets" / f"{name}.stderr.txt", ctx.out_dir / "tcpdump.stderr.txt")


def test_collect_from_kept_files(assets: Path, tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    _kept(assets, ctx)
    out = PacketCapture().collect(ctx, _completed())[1]
    assert out.error is None
    assert out.summary is not None
    s = out.summary.to_dict()
    assert (s["captured"], s["packets"], s["received_by_filter"]) == (19, 19, 38)
    assert (s["dropped_by_kernel"], s["dropped_by_interface"]) == (0, 0)
    assert s["payload_bytes_to_receiver"] == 3000
    assert (s["filter"], s["counters_scope"], s["packets_outside_invocations"]) == (None, "pass", 0)
    assert out.artifacts == [
        "pass/capture.pcap",
        "pass/inv1/capture-summary.txt",
        "pass/inv1/capture.pcap",
        "pass/tcpdump.stderr.txt",
    ]
    lines = (ctx.windows[0].out_dir / "capture-summary.txt").read_text().splitlines()
    assert len(lines) == 19
    assert lines[3] == "1795968601.894885 tcp 127.0.0.1:40232 -> 127.0.0.1:40111 [P.] payload 3000"
    assert lines[-1] == "1795968601.895538 udp 127.0.0.1:42028 -> 127.0.0.1:40112 payload 5"
    # the invocation's own pcap holds exactly its packets, frames verbatim
    _, again = read_pcap((ctx.windows[0].out_dir / "capture.pcap").read_bytes())
    _, whole = read_pcap(_pcap(assets, "lo-en10mb"))
    assert [p.frame for p in again] == [p.frame for p in whole]


def test_packets_are_split_by_invocation_window(assets: Path, tmp_path: Path) -> None:
    _, whole = read_pcap(_pcap(assets, "lo-en10mb"))
    middle = whole[8].ts
    end = whole[-1].ts - 1e-6  # pcap stamps are microseconds
    ctx = _ctx(tmp_path, [(0.0, middle), (middle + 1e-6, end)])
    _kept(assets, ctx)
    outs = PacketCapture().collect(ctx, _completed())
    assert outs[1].summary is not None and outs[2].summary is not None
    first, second = outs[1].summary.to_dict(), outs[2].summary.to_dict()
    in_first = sum(1 for p in whole if p.ts <= middle)
    in_second = sum(1 for p in whole if middle < p.ts <= end)
    assert (first["packets"], second["packets"]) == (in_first, in_second)
    assert in_first > 0 and in_second > 0
    # what fell in no window is counted, never silently given to an invocation
    assert first["packets_outside_invocations"] == len(whole) - in_first - in_second > 0


def test_collect_without_counters_is_an_error(assets: Path, tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    _kept(assets, ctx)
    (ctx.out_dir / "tcpdump.stderr.txt").write_text("tcpdump: listening on any\n")
    out = PacketCapture().collect(ctx, _completed(None, 9))[1]
    assert out.summary is None
    assert out.error == "tcpdump was killed by signal 9 without reporting its packet counters"


def test_collect_truncated_pcap_is_an_error(assets: Path, tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    _kept(assets, ctx)
    (ctx.out_dir / "capture.pcap").write_bytes(b"\x00\x01garbage")
    out = PacketCapture().collect(ctx, _completed())[1]
    assert out.summary is None
    assert out.error is not None and out.error.startswith("capture.pcap could not be parsed")


def _udp_and_icmp() -> bytes:
    out = io.BytesIO()
    writer = dpkt.pcap.Writer(out, linktype=DLT_EN10MB)
    lo = socket.inet_pton(socket.AF_INET, "127.0.0.1")
    other = socket.inet_pton(socket.AF_INET, "127.0.0.2")
    udp = dpkt.udp.UDP(sport=5000, dport=9, data=b"telemetry")
    udp.ulen = len(bytes(udp))
    frames = [
        dpkt.ip.IP(src=lo, dst=other, p=dpkt.ip.IP_PROTO_UDP, data=udp),
        # the kernel's answer: port unreachable (an error, not a contact)
        dpkt.ip.IP(src=other, dst=lo, p=dpkt.ip.IP_PROTO_ICMP,
                   data=dpkt.icmp.ICMP(type=3, code=3, data=dpkt.icmp.ICMP.Unreach())),
        # an echo request is a contact
        dpkt.ip.IP(src=lo, dst=other, p=dpkt.ip.IP_PROTO_ICMP,
                   data=dpkt.icmp.ICMP(type=8, data=dpkt.icmp.ICMP.Echo(id=1, seq=1))),
    ]  # fmt: skip
    for i, ip in enumerate(frames):
        ip.len = len(bytes(ip))
        eth = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
        writer.writepkt(bytes(eth), ts=1.0 + i)
    return out.getvalue()


def test_datagrams_and_icmp_queries_are_destinations_errors_are_not() -> None:
    _, parsed = read_pcap(_udp_and_icmp())
    assert [p.proto for p in parsed] == ["udp", "icmp", "icmp"]
    assert [p.initiates for p in parsed] == [True, False, True]
    s = summarize_packets(parsed, R, D).to_dict()
    assert s["destinations"] == ["127.0.0.2:9", "icmp:127.0.0.2"]


def test_write_pcap_round_trips(assets: Path) -> None:
    dlt, parsed = read_pcap(_pcap(assets, "any-sll2"))
    dlt2, again = read_pcap(write_pcap(dlt, parsed))
    assert (dlt2, [p.frame for p in again]) == (dlt, [p.frame for p in parsed])


def test_filter_covers_tcp_and_udp_on_every_port() -> None:
    assert capture_filter([1, 2, 3]) == "(tcp or udp) and (port 1 or port 2 or port 3)"


def test_packets_mode_decision() -> None:
    ok = ObserverStatus(True)
    missing = ObserverStatus(False, "tcpdump is not installed or not on PATH.")
    assert capture_wanted("required", ok) is True
    assert capture_wanted("best-effort", ok) is True
    assert capture_wanted("off", ok) is False
    assert capture_wanted("best-effort", missing) is False
    with pytest.raises(CollectorError) as err:
        capture_wanted("required", missing)
    assert str(err.value) == (
        "packet capture is required (--packets required) but tcpdump is not installed "
        "or not on PATH."
    )
    with pytest.raises(CollectorError, match="not a packet mode"):
        capture_wanted("sometimes", ok)


def test_probe_names_the_package_when_tcpdump_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    status = PacketCapture.probe()
    assert not status.available
    assert status.reason is not None
    assert "tcpdump is not installed" in status.reason
    assert "install the Debian package 'tcpdump'" in status.reason


def test_stop_before_start_records_nothing() -> None:
    assert PacketCapture().stop() == {}


# -- draining: the pcap holds every packet the namespace received ---------------------------

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop
    lo:  104218      51    0    0    0     0          0         0   104218      51    0    0
"""


def test_received_packets_sums_every_interface_of_net_dev() -> None:
    from lab.collectors.packets import received_packets

    assert received_packets(NET_DEV) == 51
    two = NET_DEV + "  eth0:  100  7  0 0 0 0 0 0  100 7 0 0\n"
    assert received_packets(two) == 58
    assert received_packets("Inter-| header only\n") is None
    assert received_packets("   lo: garbage\n") is None


def test_pcap_records_counts_only_complete_records(assets: Path, tmp_path: Path) -> None:
    from lab.collectors.packets import pcap_records

    dlt, packets = read_pcap(_pcap(assets, "any-sll2"))
    data = write_pcap(dlt, packets)
    path = tmp_path / "capture.pcap"
    path.write_bytes(data)
    assert pcap_records(path) == len(packets) > 2
    # tcpdump is still writing the last record: it does not count yet
    path.write_bytes(data[:-3])
    assert pcap_records(path) == len(packets) - 1
    path.write_bytes(data[:20])
    assert pcap_records(path) == 0
    assert pcap_records(tmp_path / "absent.pcap") == 0


def test_the_drain_waits_for_the_count_and_gives_up_on_a_drop(
    assets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lab.collectors import packets as mod

    dlt, packets = read_pcap(_pcap(assets, "any-sll2"))
    path = tmp_path / "capture.pcap"
    path.write_bytes(write_pcap(dlt, packets))
    received = {"n": 100 + len(packets)}
    monkeypatch.setattr(mod, "namespace_received", lambda pid: received["n"])
    assert mod._wait_counted(path, 1, before=100, timeout_s=0.05)
    # a packet the kernel received that never reached the file (a drop): not drained
    received["n"] += 1
    assert not mod._wait_counted(path, 1, before=100, timeout_s=0.05)
    # counters unreadable: never claimed drained
    monkeypatch.setattr(mod, "namespace_received", lambda pid: None)
    assert not mod._wait_counted(path, 1, before=100, timeout_s=0.05)
