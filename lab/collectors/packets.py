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
then applies ``--packets``); ``stop`` never raises: a failure is ``CollectorOutput.error``. Before
it interrupts tcpdump, ``stop`` waits until the pcap holds every packet the pass's namespace
received (its interfaces' counters, read through tcpdump's own ``/proc/<pid>/net/dev``), or,
when that count cannot be met (a drop, no namespace), until the pcap stops growing.
Without a namespace (the sandbox off) the capture falls back to ``lo`` filtered on the
fixture ports, and says so.

Kept verbatim per pass: ``capture.pcap`` and ``tcpdump.stderr.txt`` (tcpdump's own
counters); written from them per invocation: ``inv<N>/capture.pcap`` (that window's
packets, same link type) and ``inv<N>/capture-summary.txt`` (one line per packet). The pcap
is parsed with dpkt (``lab.collectors.packets_pcap``).
"""

from __future__ import annotations

import re
import struct
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import dpkt

from lab.collectors.base import CollectorOutput, PassContext, SessionCollector, Window
from lab.collectors.packets_pcap import (
    DLT_LINUX_SLL2,
    SNAPLEN,
    Packet,
    read_pcap,
    summarize_packets,
    summary_lines,
    write_pcap,
)
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
#: how long stop() waits for the pcap to hold as many packets as the namespace's interfaces
#: received, before falling back to waiting for quiet (a drop makes that count unreachable)
COUNTED_TIMEOUT_S = 0.5
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


def received_packets(net_dev_text: str) -> int | None:
    """Packets received by every interface, from a ``/proc/<pid>/net/dev`` table."""
    total = 0
    rows = [line for line in net_dev_text.splitlines() if ":" in line]
    for line in rows:
        fields = line.split(":", 1)[1].split()
        if len(fields) < 2 or not fields[1].isdigit():
            return None
        total += int(fields[1])
    return total if rows else None


def namespace_received(pid: int) -> int | None:
    """``received_packets`` of the network namespace process ``pid`` is in."""
    try:
        return received_packets(Path(f"/proc/{pid}/net/dev").read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError):
        return None


def pcap_records(path: Path) -> int:
    """Complete packet records in a pcap file being written (a record cut short by a
    write in progress is not counted)."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    if len(data) < 24:
        return 0
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    count, offset = 0, 24
    while offset + 16 <= len(data):
        (included,) = struct.unpack_from(order + "I", data, offset + 8)
        offset += 16 + included
        if offset > len(data):
            break
        count += 1
    return count


def _wait_counted(path: Path, pid: int, before: int, timeout_s: float = COUNTED_TIMEOUT_S) -> bool:
    """Wait until the pcap holds at least as many packets as the pass's namespace received
    since the capture listened (every packet there is received once, on ``lo``; tcpdump on
    ``any`` keeps each once). True once it does: nothing is left in tcpdump's buffer."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = namespace_received(pid)
        if now is None:
            return False
        if pcap_records(path) >= now - before:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


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
        #: packets the pass's namespace had received when tcpdump listened (None: no
        #: namespace, or its counters could not be read)
        self._received_before: int | None = None

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
        if ctx.netns_argv:
            # read after tcpdump listens: a packet between the two is captured but not
            # counted, which only makes the drain condition easier to meet
            self._received_before = namespace_received(self._bg.pid)

    def stop(self) -> dict[int, CollectorOutput]:
        """Interrupt tcpdump (SIGINT), then parse its counters and the pcap. Idempotent."""
        ctx, bg = self._ctx, self._bg
        if ctx is None or bg is None:
            return {}
        pcap, _ = self._paths(ctx)
        before = self._received_before
        # every packet the namespace received is in the pcap, or else the pcap stopped growing
        if before is None or not _wait_counted(pcap, bg.pid, before):
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
            summary = replace(
                summary,
                # tcpdump counts per capture: a drop cannot be told apart per invocation
                captured=counters["captured"],
                received_by_filter=counters["received_by_filter"],
                dropped_by_kernel=counters["dropped_by_kernel"],
                # tcpdump prints this line only when the count is not zero
                dropped_by_interface=counters["dropped_by_interface"] or 0,
                counters_scope="pass",
                packets_outside_invocations=outside,
                link_type=dlt,
                interface=self.interface,
                namespace=bool(ctx.netns_argv),
                filter=self.filter,
            )
            artifacts = sorted([*session, ctx.relative(slice_path), ctx.relative(summary_path)])
            outputs[window.index] = CollectorOutput(self.name, summary, artifacts=artifacts)
        return outputs
