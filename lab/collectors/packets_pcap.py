"""A pcap file read and written, and what its packets say (pure: bytes in, records out; the
capture itself is ``lab.collectors.packets``). Parsed with dpkt, whatever the link type
tcpdump chose (``any`` gives Linux cooked v2, ``lo`` Ethernet); TCP payload is counted in
sequence space, so a retransmitted byte counts once.

    dlt, packets = read_pcap(Path("capture.pcap").read_bytes())
    mine = [p for p in packets if window.start <= p.ts <= window.end]
    Path("inv1/capture.pcap").write_bytes(write_pcap(dlt, mine))     # same link type
    summarize_packets(mine, receiver_port=40001, decoy_port=40002)  # a PacketSummary
    # PacketSummary(packets=18, payload_bytes_to_receiver=262144, destinations=(...), ...)
"""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import dpkt

from lab.model.observed import PacketFlow, PacketSummary

#: bytes kept of each packet: link + IP + TCP headers and the protocol's request lines (at
#: most 256 bytes). Payload sizes come from the IP header, not from the captured bytes. A
#: full snap length makes libpcap use ~256 KiB ring slots in immediate mode, and a 512 KiB
#: upload then overflows the ring ("packets dropped by kernel"); measured on this machine.
SNAPLEN = 512

DLT_NULL = 0
DLT_EN10MB = 1
DLT_RAW = 101
DLT_LOOP = 108
DLT_LINUX_SLL = 113
DLT_LINUX_SLL2 = 276
#: the classic DLT_RAW value on some BSD-derived writers
DLT_RAW_ALT = 12


@dataclass(frozen=True)
class Packet:
    ts: float
    proto: str  # "tcp", "udp" or "icmp"
    src: str
    sport: int
    dst: str
    dport: int
    #: tcpdump-style flags ("S", "S.", "P.", "F.", "R."); "" for UDP; "type N" for ICMP
    flags: str
    syn: bool
    ack: bool
    seq: int
    payload: int
    #: the captured frame, verbatim (for the per-invocation pcap)
    frame: bytes = field(default=b"", repr=False, compare=False)
    #: ICMP type (None for TCP and UDP)
    icmp_type: int | None = None

    @property
    def source(self) -> str:
        return _endpoint(self.src, self.sport)

    @property
    def destination(self) -> str:
        if self.proto == "icmp":
            return f"icmp:{self.dst}"
        return _endpoint(self.dst, self.dport)

    @property
    def initiates(self) -> bool:
        """A packet that starts contact with its destination: a TCP SYN (not SYN-ACK), any
        UDP datagram, an ICMP query (echo, timestamp …, not an error or a reply)."""
        if self.proto == "tcp":
            return self.syn and not self.ack
        if self.proto == "icmp":
            return self.icmp_type not in ICMP_NOT_INITIATING
        return True


#: ICMP (v4 and v6) types that answer or report rather than initiate: echo replies,
#: destination unreachable, time exceeded, parameter problems, …
ICMP_NOT_INITIATING = frozenset({0, 3, 4, 5, 11, 12, 14, 16, 18, 1, 2, 129})


def _endpoint(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


_TCP_FLAGS = (
    (dpkt.tcp.TH_SYN, "S"),
    (dpkt.tcp.TH_FIN, "F"),
    (dpkt.tcp.TH_RST, "R"),
    (dpkt.tcp.TH_PUSH, "P"),
    (dpkt.tcp.TH_URG, "U"),
)


def _tcp_flags(flags: int) -> str:
    text = "".join(ch for bit, ch in _TCP_FLAGS if flags & bit)
    return text + "." if flags & dpkt.tcp.TH_ACK else text


def _network(dlt: int, frame: bytes) -> dpkt.Packet | None:
    """The IPv4/IPv6 packet inside one link-layer frame, or None (ARP and the like)."""
    inner: Any
    if dlt == DLT_EN10MB:
        # Linux loopback is Ethernet with all-zero MAC addresses.
        inner = dpkt.ethernet.Ethernet(frame).data
    elif dlt == DLT_LINUX_SLL:
        inner = dpkt.sll.SLL(frame).data
    elif dlt == DLT_LINUX_SLL2:
        inner = dpkt.sll2.SLL2(frame).data
    elif dlt in (DLT_NULL, DLT_LOOP):
        # 4-byte address family: host byte order for NULL, network order for LOOP.
        fmt = "=I" if dlt == DLT_NULL else ">I"
        (family,) = struct.unpack(fmt, frame[:4])
        body = frame[4:]
        inner = dpkt.ip.IP(body) if family == socket.AF_INET else dpkt.ip6.IP6(body)
    elif dlt in (DLT_RAW, DLT_RAW_ALT):
        inner = dpkt.ip.IP(frame) if frame[:1] and frame[0] >> 4 == 4 else dpkt.ip6.IP6(frame)
    else:
        raise ValueError(f"unsupported pcap link type {dlt}")
    return inner if isinstance(inner, dpkt.ip.IP | dpkt.ip6.IP6) else None


def _addresses(ip: dpkt.Packet) -> tuple[str, str, int]:
    """(src, dst, transport-layer length from the IP header, not from the captured bytes)."""
    if isinstance(ip, dpkt.ip.IP):
        header = ip.hl * 4
        return (
            socket.inet_ntop(socket.AF_INET, ip.src),
            socket.inet_ntop(socket.AF_INET, ip.dst),
            ip.len - header,
        )
    return (
        socket.inet_ntop(socket.AF_INET6, ip.src),
        socket.inet_ntop(socket.AF_INET6, ip.dst),
        ip.plen,
    )


def read_pcap(data: bytes) -> tuple[int, list[Packet]]:
    """Parse a pcap file's bytes into (link type, TCP/UDP/ICMP packets)."""
    reader = dpkt.pcap.Reader(io.BytesIO(data))
    dlt = int(reader.datalink())
    packets: list[Packet] = []
    for ts, raw in reader:
        frame = bytes(raw)
        ip = _network(dlt, frame)
        if ip is None:
            continue
        src, dst, transport_len = _addresses(ip)
        segment = ip.data
        stamp = float(ts)
        if isinstance(segment, dpkt.tcp.TCP):
            # Payload length from the headers, so that a snap-length cut cannot shrink it.
            payload = max(0, transport_len - segment.off * 4)
            packets.append(
                Packet(
                    proto="tcp",
                    sport=segment.sport,
                    dport=segment.dport,
                    flags=_tcp_flags(segment.flags),
                    syn=bool(segment.flags & dpkt.tcp.TH_SYN),
                    ack=bool(segment.flags & dpkt.tcp.TH_ACK),
                    seq=segment.seq,
                    payload=payload,
                    ts=stamp,
                    src=src,
                    dst=dst,
                    frame=frame,
                )
            )
        elif isinstance(segment, dpkt.udp.UDP):
            packets.append(
                Packet(
                    proto="udp",
                    sport=segment.sport,
                    dport=segment.dport,
                    flags="",
                    syn=False,
                    ack=False,
                    seq=0,
                    payload=max(0, segment.ulen - 8),
                    ts=stamp,
                    src=src,
                    dst=dst,
                    frame=frame,
                )
            )
        elif isinstance(segment, dpkt.icmp.ICMP | dpkt.icmp6.ICMP6):
            packets.append(
                Packet(
                    proto="icmp",
                    sport=0,
                    dport=0,
                    flags=f"type {segment.type}",
                    syn=False,
                    ack=False,
                    seq=0,
                    payload=max(0, transport_len - 4),
                    icmp_type=int(segment.type),
                    ts=stamp,
                    src=src,
                    dst=dst,
                    frame=frame,
                )
            )
    return dlt, packets


def write_pcap(dlt: int, packets: Sequence[Packet]) -> bytes:
    """A pcap file of ``packets`` (their frames verbatim), link type ``dlt``."""
    out = io.BytesIO()
    writer = dpkt.pcap.Writer(out, snaplen=SNAPLEN, linktype=dlt)
    for p in packets:
        writer.writepkt(p.frame, ts=p.ts)
    return out.getvalue()


def summary_lines(packets: Sequence[Packet]) -> Iterator[str]:
    """One readable line per packet for capture-summary.txt."""
    for p in packets:
        flags = f" [{p.flags}]" if p.flags else ""
        yield (f"{p.ts:.6f} {p.proto} {p.source} -> {p.destination}{flags} payload {p.payload}")


class _SequenceSpace:
    """The TCP sequence ranges already seen in one direction of one connection, so that a
    retransmitted byte is counted once even when the retransmission is cut differently."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.ranges: list[tuple[int, int]] = []  # sorted, disjoint, half-open

    def add(self, seq: int, length: int) -> int:
        """Record ``length`` bytes at ``seq``; return how many of them are new."""
        start = (seq - self.base) % 2**32
        end = start + length
        new = length
        merged: list[tuple[int, int]] = []
        for lo, hi in self.ranges:
            if hi < start or lo > end:
                merged.append((lo, hi))
                continue
            new -= max(0, min(hi, end) - max(lo, start))
            start, end = min(lo, start), max(hi, end)
        merged.append((start, end))
        self.ranges = sorted(merged)
        return new


def summarize_packets(
    packets: Sequence[Packet], receiver_port: int, decoy_port: int
) -> PacketSummary:
    """Per-port, per-direction counts, and every destination contacted: where connections
    (SYN), UDP datagrams and ICMP queries went, whatever the port. TCP payload is counted in
    sequence space: a retransmitted byte counts once (``retransmitted_bytes`` says how many
    were seen again)."""
    roles = {receiver_port: "receiver", decoy_port: "decoy"}
    flows: dict[tuple[int, str], dict[str, int]] = {}
    destinations: set[str] = set()
    connections: dict[int, int] = {}
    spaces: dict[tuple[str, int, str, int], _SequenceSpace] = {}
    retransmitted = 0
    for p in packets:
        if p.initiates:
            destinations.add(p.destination)
            if p.proto == "tcp":
                connections[p.dport] = connections.get(p.dport, 0) + 1
        if p.dport in roles:
            port, direction = p.dport, "to"
        elif p.sport in roles:
            port, direction = p.sport, "from"
        else:
            port, direction = p.dport, "to"
        flow = flows.setdefault((port, direction), {"packets": 0, "payload_bytes": 0})
        flow["packets"] += 1
        if p.proto != "tcp":
            flow["payload_bytes"] += p.payload
            continue
        key = (p.src, p.sport, p.dst, p.dport)
        if p.syn:
            # A SYN takes one sequence number; data starts after it. A port reused for a
            # new connection starts a new sequence space.
            spaces[key] = _SequenceSpace(p.seq + 1)
        if p.payload:
            space = spaces.setdefault(key, _SequenceSpace(p.seq))
            new = space.add(p.seq, p.payload)
            retransmitted += p.payload - new
            flow["payload_bytes"] += new

    def payload(port: int, direction: str) -> int:
        return flows.get((port, direction), {}).get("payload_bytes", 0)

    return PacketSummary(
        packets=len(packets),
        payload_bytes_to_receiver=payload(receiver_port, "to"),
        payload_bytes_from_receiver=payload(receiver_port, "from"),
        payload_bytes_to_decoy=payload(decoy_port, "to"),
        payload_bytes_from_decoy=payload(decoy_port, "from"),
        connections_to_receiver=connections.get(receiver_port, 0),
        connections_to_decoy=connections.get(decoy_port, 0),
        retransmitted_bytes=retransmitted,
        flows=tuple(
            PacketFlow(
                port=port,
                role=roles.get(port, "other"),
                direction=direction,
                packets=counts["packets"],
                payload_bytes=counts["payload_bytes"],
            )
            for (port, direction), counts in sorted(flows.items())
        ),
        destinations=tuple(sorted(destinations)),
        first_packet_at=packets[0].ts if packets else None,
        last_packet_at=packets[-1].ts if packets else None,
    )


# ---------------------------------------------------------------------------------------
