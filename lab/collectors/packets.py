"""The packet collector: tcpdump once per pass, inside the pass's network namespace, on
every interface and with no filter, so that every packet a client emits — by any API, from
any descendant — is captured and its destination judged. It is passive, so it runs beside
any pass. Packets are attributed to an invocation by its time window (the namespace holds
only the receiver, the decoy and one client at a time).

    status = PacketCapture.probe()
    capture = PacketCapture()
    capture.start(pass_ctx)         # tcpdump listens (inside the namespace) before this returns
    ...                             # the invocations run; the runner fills each window
    outputs = capture.stop()        # {1: CollectorOutput("packets", summary), ...}

``start`` raises :class:`~lab.errors.CollectorError` when tcpdump cannot listen (the runner
then applies ``--packets``); ``stop`` never raises: a failure is ``CollectorOutput.error``.
Without a namespace (the sandbox off) the capture falls back to ``lo`` filtered on the
fixture ports, and says so.

Kept verbatim per pass: ``capture.pcap`` and ``tcpdump.stderr.txt`` (tcpdump's own
counters); written from them per invocation: ``inv<N>/capture.pcap`` (that window's
packets, same link type) and ``inv<N>/capture-summary.txt`` (one line per packet). The pcap
is parsed with dpkt.
"""

from __future__ import annotations

import io
import re
import socket
import struct
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import dpkt

from lab.collectors.base import CollectorOutput, PassContext, SessionCollector, Window
from lab.errors import CollectorError, LabError, ToolMissingError
from lab.host.procs import Background, Completed, require_tool
from lab.model import ObserverStatus

PCAP_FILE = "capture.pcap"
STDERR_FILE = "tcpdump.stderr.txt"
SUMMARY_FILE = "capture-summary.txt"
LOOPBACK = "lo"
#: tcpdump's pseudo-interface for every interface (of the pass's namespace)
ANY = "any"
LOOPBACK_SYSFS = Path("/sys/class/net/lo")
#: how long start() waits for tcpdump's "listening on lo" before giving up
READY_TIMEOUT_S = 10.0
#: how long stop() waits for the pcap to stop growing before interrupting tcpdump
DRAIN_TIMEOUT_S = 2.0
DRAIN_QUIET_S = 0.2
#: bytes kept of each packet: link + IP + TCP headers and the protocol's request lines (at
#: most 256 bytes). Payload sizes come from the IP header, not from the captured bytes. A
#: full snap length makes libpcap use ~256 KiB ring slots in immediate mode, and a 512 KiB
#: upload then overflows the ring ("packets dropped by kernel"); measured on this machine.
SNAPLEN = 512
#: --packets modes the runner accepts
PACKET_MODES: tuple[str, ...] = ("required", "best-effort", "off")

#: tcpdump's end-of-capture counters, e.g. "18 packets captured" (tcpdump prints the
#: "dropped by interface" line only when that count is not zero)
_COUNTERS: dict[str, re.Pattern[str]] = {
    "captured": re.compile(r"^(\d+) packets? captured$"),
    "received_by_filter": re.compile(r"^(\d+) packets? received by filter$"),
    "dropped_by_kernel": re.compile(r"^(\d+) packets? dropped by kernel$"),
    "dropped_by_interface": re.compile(r"^(\d+) packets? dropped by interface$"),
}

DLT_NULL = 0
DLT_EN10MB = 1
DLT_RAW = 101
DLT_LOOP = 108
DLT_LINUX_SLL = 113
DLT_LINUX_SLL2 = 276
#: the classic DLT_RAW value on some BSD-derived writers
DLT_RAW_ALT = 12


def capture_filter(ports: Sequence[int]) -> str:
    """BPF filter: TCP and UDP to or from any fixture port (IPv4 and IPv6)."""
    return "(tcp or udp) and (" + " or ".join(f"port {p}" for p in ports) + ")"


def capture_wanted(mode: str, status: ObserverStatus) -> bool:
    """The runner's decision for ``--packets MODE``.

    True: capture. False: do not (``off``, or ``best-effort`` and unavailable: the reason
    is ``status.reason``). Raises :class:`CollectorError` when ``required`` is impossible.
    """
    if mode not in PACKET_MODES:
        raise CollectorError(
            f"--packets {mode!r} is not a packet mode; use one of {', '.join(PACKET_MODES)}."
        )
    if mode == "off":
        return False
    if status.available:
        return True
    if mode == "required":
        reason = (status.reason or "unknown reason").rstrip(".")
        raise CollectorError(f"packet capture is required (--packets required) but {reason}.")
    return False


def parse_counters(stderr_text: str) -> dict[str, int | None]:
    counters: dict[str, int | None] = {key: None for key in _COUNTERS}
    for line in stderr_text.splitlines():
        for key, pattern in _COUNTERS.items():
            m = pattern.match(line.strip())
            if m is not None:
                counters[key] = int(m.group(1))
    return counters


# ---------------------------------------------------------------------------------------
# pcap parsing (pure: bytes in, records out)


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
) -> dict[str, Any]:
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

    return {
        "packets": len(packets),
        "payload_bytes_to_receiver": payload(receiver_port, "to"),
        "payload_bytes_from_receiver": payload(receiver_port, "from"),
        "payload_bytes_to_decoy": payload(decoy_port, "to"),
        "payload_bytes_from_decoy": payload(decoy_port, "from"),
        "connections_to_receiver": connections.get(receiver_port, 0),
        "connections_to_decoy": connections.get(decoy_port, 0),
        "retransmitted_bytes": retransmitted,
        "flows": [
            {
                "port": port,
                "role": roles.get(port, "other"),
                "direction": direction,
                "packets": counts["packets"],
                "payload_bytes": counts["payload_bytes"],
            }
            for (port, direction), counts in sorted(flows.items())
        ],
        "destinations": sorted(destinations),
        "first_packet_at": packets[0].ts if packets else None,
        "last_packet_at": packets[-1].ts if packets else None,
    }


# ---------------------------------------------------------------------------------------
# The capture


def tcpdump_argv(tcpdump: str, interface: str, bpf_filter: str | None) -> list[str]:
    argv = [
        tcpdump,
        "-i",
        interface,
        "-n",
        # Packets go to stdout (the pcap file) one by one (-U) and are handed over by the
        # kernel at once (--immediate-mode), so nothing is still buffered in the ring when
        # we interrupt tcpdump. Writing to stdout also avoids tcpdump's own file creation
        # after it drops privileges to the 'tcpdump' user.
        "-U",
        "--immediate-mode",
        "-s",
        str(SNAPLEN),
        "-w",
        "-",
    ]
    return [*argv, bpf_filter] if bpf_filter else argv


def _wait_listening(bg: Background, stderr: Path, interface: str, timeout_s: float) -> str | None:
    """None once tcpdump says it is listening; else why not (one clause)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = stderr.read_text(errors="replace") if stderr.exists() else ""
        if f"listening on {interface}" in text:
            return None
        if not bg.alive():
            done = bg.stop()
            excerpt = " ".join(
                ln.strip() for ln in done.stderr_excerpt().splitlines() if ln.strip()
            )
            detail = excerpt or f"exit status {done.exit_status}"
            return f"tcpdump exited before listening on {interface} ({detail})"
        time.sleep(0.02)
    bg.stop()
    return f"tcpdump did not report listening on {interface} within {timeout_s:g} s"


def _wait_quiet(path: Path, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
    """Wait until the pcap has stopped growing, so late packets are written before SIGINT."""
    deadline = time.monotonic() + timeout_s
    size = -1
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        now_size = path.stat().st_size if path.exists() else 0
        if now_size != size:
            size, quiet_since = now_size, time.monotonic()
        elif time.monotonic() - quiet_since >= DRAIN_QUIET_S:
            return
        time.sleep(0.05)


def in_window(packet: Packet, window: Window) -> bool:
    return window.start <= packet.ts <= window.end


class PacketCapture(SessionCollector):
    """tcpdump around one pass: inside its network namespace on ``any`` with no filter (or,
    with no namespace, on ``lo`` filtered on the fixture ports)."""

    name: ClassVar[str] = "packets"

    def __init__(self, *, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        self.ready_timeout_s = ready_timeout_s
        self._ctx: PassContext | None = None
        self._bg: Background | None = None
        self.interface = ANY
        self.filter: str | None = None

    @classmethod
    def probe(cls) -> ObserverStatus:
        """A real, brief capture on lo: tool, interface and permission checked at once."""
        try:
            tcpdump = require_tool("tcpdump")
        except ToolMissingError as exc:
            return ObserverStatus(False, str(exc))
        if not LOOPBACK_SYSFS.exists():
            return ObserverStatus(False, f"the loopback interface {LOOPBACK} is absent")
        with tempfile.TemporaryDirectory(prefix="lab-packets-probe-") as tmp:
            stderr = Path(tmp) / STDERR_FILE
            # Port 9 (discard): nothing of ours uses it; the filter only has to compile.
            bg = Background(
                tcpdump_argv(tcpdump, LOOPBACK, capture_filter([9])),
                purpose="packet capture probe",
                tool="tcpdump",
                stdout=Path(tmp) / PCAP_FILE,
                stderr=stderr,
            )
            try:
                bg.__enter__()
            except LabError as exc:
                return ObserverStatus(False, str(exc))
            failure = _wait_listening(bg, stderr, LOOPBACK, READY_TIMEOUT_S)
            bg.stop()
            if failure is not None:
                hint = (
                    "; capturing needs root or CAP_NET_RAW"
                    if "ermission" in failure or "not permitted" in failure
                    else ""
                )
                return ObserverStatus(False, f"{failure}{hint}")
        return ObserverStatus(True, None, {"interface": LOOPBACK})

    def _paths(self, ctx: PassContext) -> tuple[Path, Path]:
        return ctx.out_dir / PCAP_FILE, ctx.out_dir / STDERR_FILE

    def start(self, ctx: PassContext) -> None:
        """Start tcpdump; return once it listens. Raises :class:`CollectorError`."""
        self._ctx = ctx
        pcap, stderr = self._paths(ctx)
        if ctx.netns_argv:
            self.interface, self.filter = ANY, None
        else:
            ports = [ctx.receiver_address[1], ctx.decoy_address[1]]
            self.interface, self.filter = LOOPBACK, capture_filter(ports)
        try:
            tcpdump = require_tool("tcpdump")
            self._bg = Background(
                [*ctx.netns_argv, *tcpdump_argv(tcpdump, self.interface, self.filter)],
                purpose=f"packet capture for one pass (tcpdump on {self.interface})",
                log=ctx.log,
                tool="tcpdump",
                stdout=pcap,
                stderr=stderr,
            )
            self._bg.__enter__()
        except LabError as exc:
            raise CollectorError(f"packet capture could not start: {exc}") from exc
        failure = _wait_listening(self._bg, stderr, self.interface, self.ready_timeout_s)
        if failure is not None:
            raise CollectorError(f"packet capture could not start: {failure}.")

    def stop(self) -> dict[int, CollectorOutput]:
        """Interrupt tcpdump (SIGINT), then parse its counters and the pcap. Idempotent."""
        ctx, bg = self._ctx, self._bg
        if ctx is None or bg is None:
            return {}
        pcap, _ = self._paths(ctx)
        _wait_quiet(pcap)
        done = bg.stop()
        return self.collect(ctx, done)

    def collect(self, ctx: PassContext, done: Completed) -> dict[int, CollectorOutput]:
        pcap, stderr = self._paths(ctx)
        session = [ctx.relative(p) for p in (pcap, stderr) if p.exists()]
        counters = parse_counters(stderr.read_text(errors="replace") if stderr.exists() else "")
        error: str | None = None
        dlt, packets = DLT_LINUX_SLL2, list[Packet]()
        if counters["captured"] is None or counters["dropped_by_kernel"] is None:
            how = (
                f"was killed by signal {done.killed_by_signal}"
                if done.killed_by_signal
                else f"exited with status {done.exit_status}"
            )
            error = f"tcpdump {how} without reporting its packet counters"
        else:
            try:
                dlt, packets = read_pcap(pcap.read_bytes())
            except (OSError, ValueError, IndexError, struct.error, dpkt.dpkt.Error) as exc:
                error = f"{PCAP_FILE} could not be parsed ({type(exc).__name__}: {exc})"
        outside = sum(1 for p in packets if not any(in_window(p, w) for w in ctx.windows))
        outputs: dict[int, CollectorOutput] = {}
        for window in ctx.windows:
            if error is not None:
                outputs[window.index] = CollectorOutput(self.name, None, session, error=error)
                continue
            mine = [p for p in packets if in_window(p, window)]
            window.out_dir.mkdir(parents=True, exist_ok=True)
            slice_path = window.out_dir / PCAP_FILE
            slice_path.write_bytes(write_pcap(dlt, mine))
            summary_path = window.out_dir / SUMMARY_FILE
            summary_path.write_text("".join(line + "\n" for line in summary_lines(mine)))
            summary = summarize_packets(mine, ctx.receiver_address[1], ctx.decoy_address[1])
            summary.update(
                {
                    # tcpdump counts per capture: a drop cannot be told apart per invocation
                    "captured": counters["captured"],
                    "received_by_filter": counters["received_by_filter"],
                    "dropped_by_kernel": counters["dropped_by_kernel"],
                    # tcpdump prints this line only when the count is not zero
                    "dropped_by_interface": counters["dropped_by_interface"] or 0,
                    "counters_scope": "pass",
                    "packets_outside_invocations": outside,
                    "link_type": dlt,
                    "interface": self.interface,
                    "namespace": bool(ctx.netns_argv),
                    "filter": self.filter,
                }
            )
            artifacts = sorted([*session, ctx.relative(slice_path), ctx.relative(summary_path)])
            outputs[window.index] = CollectorOutput(self.name, summary, artifacts=artifacts)
        return outputs
