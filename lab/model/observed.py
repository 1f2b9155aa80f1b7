"""What each independent observer recorded about one invocation, as typed values: one frozen
summary per collector (strace, bpftrace, perf, packets) and ``Observed``, the set of them an
invocation holds. ``to_dict()`` is exactly the ``observed.<name>`` record of
``results.json`` (``lab/schemas/results.schema.json``); ``from_dict()`` reads it back
(``lab merge``). The collectors (``lab.collectors``) *build* these; the judges and the
presenters read their fields. No I/O lives here.

    observed = Observed()
    observed.add(StraceSummary(connects=1, destinations=("127.0.0.1:40001",)))
    observed.strace.source_bytes_read        # 0: observed; None: not observed (see below)
    Observed.from_dict(observed.to_dict()) == observed           # True

A figure the observer could not see is ``None`` and left out of the record, never 0:
``StraceSummary.unobserved`` says why for each (strace without ``-yy``'s decoded
descriptors); a bpftrace counter whose probe could not attach is ``None`` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "BPFTRACE_COUNTERS",
    "DESCRIPTOR_KEYS",
    "SUMMARY_TYPES",
    "BpftraceSummary",
    "Observed",
    "ObserverSummary",
    "PacketFlow",
    "PacketSummary",
    "PerfSummary",
    "PerfSymbol",
    "StraceSummary",
]

#: strace figures that need ``-yy``'s decoded descriptors to be known at all
DESCRIPTOR_KEYS = ("source_bytes_read", "source_reads", "source_mmaps", "sent_bytes")


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"observed '{key}' is not an integer: {value!r}")
    return value


def _opt_int(data: Mapping[str, Any], key: str) -> int | None:
    return None if data.get(key) is None else _int(data, key)


def _opt_float(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"observed '{key}' is not a number: {value!r}")
    return float(value) if isinstance(value, float) else value


def _float(data: Mapping[str, Any], key: str) -> float:
    value = _opt_float(data, key)
    if value is None:
        raise ValueError(f"observed '{key}' is missing")
    return value


def _strs(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v) for v in data.get(key) or ())


def _counts(data: Mapping[str, Any], key: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in (data.get(key) or {}).items()}


@dataclass(frozen=True)
class StraceSummary:
    """What ``strace.txt`` says about one invocation (``lab.collectors.strace_parse``)."""

    observer: ClassVar[str] = "strace"

    connects: int = 0
    destinations: tuple[str, ...] = ()
    syscalls: int = 0
    processes: int = 0
    exit_status: int | None = None
    killed_by_signal: int | None = None
    #: lines that are neither calls, resumptions, signals nor exits (kept count, not hidden)
    unparsed_lines: int = 0
    #: channels the client used whose destinations a syscall trace cannot see
    undecodable: tuple[str, ...] = ()
    #: calls of the sandbox's own steps (before the client's exec), left out of the rest
    sandbox_syscalls: int = 0
    #: the DESCRIPTOR_KEYS figures: None when not observed, with the reason in ``unobserved``
    source_bytes_read: int | None = 0
    source_reads: int | None = 0
    source_mmaps: int | None = 0
    sent_bytes: int | None = 0
    #: figure -> why it was not observed (absent from the record, never a zero)
    unobserved: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a figure with a reason for being unknown must not also carry a number
        known = [k for k in self.unobserved if getattr(self, k, None) is not None]
        if known:
            raise ValueError(f"strace figures both observed and not observed: {known}")

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "source_bytes_read": self.source_bytes_read,
            "source_reads": self.source_reads,
            "source_mmaps": self.source_mmaps,
            "connects": self.connects,
            "destinations": list(self.destinations),
            "sent_bytes": self.sent_bytes,
            "syscalls": self.syscalls,
            "processes": self.processes,
            "exit_status": self.exit_status,
            "killed_by_signal": self.killed_by_signal,
            "unparsed_lines": self.unparsed_lines,
            "undecodable": list(self.undecodable),
            "sandbox_syscalls": self.sandbox_syscalls,
        }
        for key in DESCRIPTOR_KEYS:
            if row[key] is None:
                del row[key]
        if self.unobserved:
            row["unobserved"] = dict(self.unobserved)
        return row

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StraceSummary:
        return cls(
            connects=_int(data, "connects"),
            destinations=_strs(data, "destinations"),
            syscalls=_int(data, "syscalls"),
            processes=_int(data, "processes"),
            exit_status=_opt_int(data, "exit_status"),
            killed_by_signal=_opt_int(data, "killed_by_signal"),
            unparsed_lines=_int(data, "unparsed_lines"),
            undecodable=_strs(data, "undecodable"),
            sandbox_syscalls=_int(data, "sandbox_syscalls"),
            source_bytes_read=_opt_int(data, "source_bytes_read"),
            source_reads=_opt_int(data, "source_reads"),
            source_mmaps=_opt_int(data, "source_mmaps"),
            sent_bytes=_opt_int(data, "sent_bytes"),
            unobserved={str(k): str(v) for k, v in (data.get("unobserved") or {}).items()},
        )


#: bpftrace's counters in record order; a None one is left out of the record
BPFTRACE_COUNTERS = (
    "hash_calls",
    "send_payload_calls",
    "busy_wait_calls",
    "connects",
    "read_bytes",
    "sent_bytes",
    "switches_out",
)


@dataclass(frozen=True)
class BpftraceSummary:
    """One invocation's part of a bpftrace session (``lab.collectors.bpftrace_parse``).

    A counter is None when the script defines no map for it or the binary lacks the symbol
    its uprobe needs (the function is then in ``absent_symbols``): not observed, never 0.
    """

    observer: ClassVar[str] = "bpftrace"

    hash_calls: int | None = None
    send_payload_calls: int | None = None
    busy_wait_calls: int | None = None
    connects: int | None = None
    read_bytes: int | None = None
    sent_bytes: int | None = None
    switches_out: int | None = None
    destinations: tuple[str, ...] = ()
    #: final map values of this cgroup, verbatim as the probe printed them
    maps: dict[str, str] = field(default_factory=dict)
    absent_symbols: tuple[str, ...] = ()
    #: maps the session defines that printed nothing for this cgroup (an observed 0)
    unprinted_maps: tuple[str, ...] = ()
    function_entries: dict[str, int] = field(default_factory=dict)
    uring_ops: dict[str, int] = field(default_factory=dict)
    undecodable: tuple[str, ...] = ()
    attached_probes: int | None = None
    lost_events: int = 0
    #: no event line was lost (printf lines can be; the maps never are)
    events_complete: bool = True
    cgroup_id: int | None = None

    def counter(self, key: str) -> int | None:
        """A counter by its record key (``BPFTRACE_COUNTERS``)."""
        value: int | None = getattr(self, key)
        return value

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            key: self.counter(key) for key in BPFTRACE_COUNTERS if self.counter(key) is not None
        }
        row.update(
            destinations=list(self.destinations),
            maps=dict(self.maps),
            absent_symbols=list(self.absent_symbols),
            unprinted_maps=list(self.unprinted_maps),
            function_entries=dict(self.function_entries),
            uring_ops=dict(self.uring_ops),
            undecodable=list(self.undecodable),
            attached_probes=self.attached_probes,
            lost_events=self.lost_events,
            events_complete=self.events_complete,
            cgroup_id=self.cgroup_id,
        )
        return row

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BpftraceSummary:
        return cls(
            **{key: _opt_int(data, key) for key in BPFTRACE_COUNTERS},
            destinations=_strs(data, "destinations"),
            maps={str(k): str(v) for k, v in (data.get("maps") or {}).items()},
            absent_symbols=_strs(data, "absent_symbols"),
            unprinted_maps=_strs(data, "unprinted_maps"),
            function_entries=_counts(data, "function_entries"),
            uring_ops=_counts(data, "uring_ops"),
            undecodable=_strs(data, "undecodable"),
            attached_probes=_opt_int(data, "attached_probes"),
            lost_events=_int(data, "lost_events"),
            events_complete=bool(data["events_complete"]),
            cgroup_id=_opt_int(data, "cgroup_id"),
        )


@dataclass(frozen=True)
class PerfSymbol:
    """One row of perf's report: a symbol of one object, its inclusive and self share."""

    symbol: str
    dso: str
    inclusive_pct: float
    self_pct: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "dso": self.dso,
            "inclusive_pct": self.inclusive_pct,
            "self_pct": self.self_pct,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PerfSymbol:
        return cls(
            symbol=str(data["symbol"]),
            dso=str(data["dso"]),
            inclusive_pct=_float(data, "inclusive_pct"),
            self_pct=_float(data, "self_pct"),
        )


@dataclass(frozen=True)
class PerfSummary:
    """CPU samples of one invocation (``lab.collectors.perf``): which event, how many
    samples, how many lost, the heaviest symbols."""

    observer: ClassVar[str] = "perf"

    #: "ibs_op" or "cpu-clock", and why that one
    event: str
    event_reason: str
    samples: int
    lost_samples: int
    #: PERF_RECORD_LOST records (lost ring-buffer chunks)
    lost_chunks: int = 0
    event_count: int | None = None
    top_symbols: tuple[PerfSymbol, ...] = ()
    #: the client's own function with the largest inclusive share (None: none sampled)
    top_client_symbol: str | None = None
    top_client_inclusive_pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "event_reason": self.event_reason,
            "samples": self.samples,
            "lost_samples": self.lost_samples,
            "lost_chunks": self.lost_chunks,
            "event_count": self.event_count,
            "top_symbols": [s.to_dict() for s in self.top_symbols],
            "top_client_symbol": self.top_client_symbol,
            "top_client_inclusive_pct": self.top_client_inclusive_pct,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PerfSummary:
        symbol = data.get("top_client_symbol")
        return cls(
            event=str(data["event"]),
            event_reason=str(data.get("event_reason", "")),
            samples=_int(data, "samples"),
            lost_samples=_int(data, "lost_samples"),
            lost_chunks=_int(data, "lost_chunks"),
            event_count=_opt_int(data, "event_count"),
            top_symbols=tuple(PerfSymbol.from_dict(s) for s in data.get("top_symbols") or ()),
            top_client_symbol=None if symbol is None else str(symbol),
            top_client_inclusive_pct=_opt_float(data, "top_client_inclusive_pct"),
        )


@dataclass(frozen=True)
class PacketFlow:
    """Packets and payload bytes one way on one port (``role``: receiver, decoy or other)."""

    port: int
    role: str
    direction: str
    packets: int
    payload_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "role": self.role,
            "direction": self.direction,
            "packets": self.packets,
            "payload_bytes": self.payload_bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PacketFlow:
        return cls(
            port=_int(data, "port"),
            role=str(data["role"]),
            direction=str(data["direction"]),
            packets=_int(data, "packets"),
            payload_bytes=_int(data, "payload_bytes"),
        )


@dataclass(frozen=True)
class PacketSummary:
    """One invocation's window of the capture (``lab.collectors.packets_pcap``), with
    tcpdump's counters, which are per capture (``counters_scope``: a drop cannot be told
    apart per invocation)."""

    observer: ClassVar[str] = "packets"

    packets: int = 0
    payload_bytes_to_receiver: int = 0
    payload_bytes_from_receiver: int = 0
    payload_bytes_to_decoy: int = 0
    payload_bytes_from_decoy: int = 0
    connections_to_receiver: int = 0
    connections_to_decoy: int = 0
    #: TCP payload seen again (counted once in the figures above)
    retransmitted_bytes: int = 0
    flows: tuple[PacketFlow, ...] = ()
    destinations: tuple[str, ...] = ()
    first_packet_at: float | None = None
    last_packet_at: float | None = None
    captured: int | None = None
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None
    dropped_by_interface: int = 0
    counters_scope: str = "pass"
    packets_outside_invocations: int = 0
    link_type: int | None = None
    interface: str | None = None
    #: captured inside the pass's network namespace (False: on the host's loopback)
    namespace: bool = False
    filter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "packets": self.packets,
            "payload_bytes_to_receiver": self.payload_bytes_to_receiver,
            "payload_bytes_from_receiver": self.payload_bytes_from_receiver,
            "payload_bytes_to_decoy": self.payload_bytes_to_decoy,
            "payload_bytes_from_decoy": self.payload_bytes_from_decoy,
            "connections_to_receiver": self.connections_to_receiver,
            "connections_to_decoy": self.connections_to_decoy,
            "retransmitted_bytes": self.retransmitted_bytes,
            "flows": [f.to_dict() for f in self.flows],
            "destinations": list(self.destinations),
            "first_packet_at": self.first_packet_at,
            "last_packet_at": self.last_packet_at,
            "captured": self.captured,
            "received_by_filter": self.received_by_filter,
            "dropped_by_kernel": self.dropped_by_kernel,
            "dropped_by_interface": self.dropped_by_interface,
            "counters_scope": self.counters_scope,
            "packets_outside_invocations": self.packets_outside_invocations,
            "link_type": self.link_type,
            "interface": self.interface,
            "namespace": self.namespace,
            "filter": self.filter,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PacketSummary:
        interface, bpf = data.get("interface"), data.get("filter")
        return cls(
            packets=_int(data, "packets"),
            payload_bytes_to_receiver=_int(data, "payload_bytes_to_receiver"),
            payload_bytes_from_receiver=_int(data, "payload_bytes_from_receiver"),
            payload_bytes_to_decoy=_int(data, "payload_bytes_to_decoy"),
            payload_bytes_from_decoy=_int(data, "payload_bytes_from_decoy"),
            connections_to_receiver=_int(data, "connections_to_receiver"),
            connections_to_decoy=_int(data, "connections_to_decoy"),
            retransmitted_bytes=_int(data, "retransmitted_bytes"),
            flows=tuple(PacketFlow.from_dict(f) for f in data.get("flows") or ()),
            destinations=_strs(data, "destinations"),
            first_packet_at=_opt_float(data, "first_packet_at"),
            last_packet_at=_opt_float(data, "last_packet_at"),
            captured=_opt_int(data, "captured"),
            received_by_filter=_opt_int(data, "received_by_filter"),
            dropped_by_kernel=_opt_int(data, "dropped_by_kernel"),
            dropped_by_interface=_int(data, "dropped_by_interface"),
            counters_scope=str(data.get("counters_scope", "pass")),
            packets_outside_invocations=_int(data, "packets_outside_invocations"),
            link_type=_opt_int(data, "link_type"),
            interface=None if interface is None else str(interface),
            namespace=bool(data.get("namespace", False)),
            filter=None if bpf is None else str(bpf),
        )


ObserverSummary = StraceSummary | BpftraceSummary | PerfSummary | PacketSummary
#: observer name -> its summary class, in report order
SUMMARY_TYPES: dict[str, type[ObserverSummary]] = {
    t.observer: t for t in (StraceSummary, BpftraceSummary, PerfSummary, PacketSummary)
}


@dataclass
class Observed:
    """The summaries one invocation has, one per observer that ran for it (None: that
    observer produced none; ``Invocation.missing`` says why)."""

    strace: StraceSummary | None = None
    bpftrace: BpftraceSummary | None = None
    perf: PerfSummary | None = None
    packets: PacketSummary | None = None

    def get(self, name: str) -> ObserverSummary | None:
        """The summary of observer ``name`` (None for any name that is no collector)."""
        if name not in SUMMARY_TYPES:
            return None
        summary: ObserverSummary | None = getattr(self, name)
        return summary

    def add(self, summary: ObserverSummary) -> None:
        setattr(self, summary.observer, summary)

    def names(self) -> list[str]:
        """The observers that have a summary, sorted (the record's key order)."""
        return sorted(name for name in SUMMARY_TYPES if self.get(name) is not None)

    def summaries(self) -> list[ObserverSummary]:
        return [s for name in self.names() if (s := self.get(name)) is not None]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __bool__(self) -> bool:
        return bool(self.names())

    def merged(self, other: Observed) -> Observed:
        """This invocation's summaries, completed by ``other``'s for the observers it lacks
        (each observer's summary comes from the pass it ran in)."""
        return Observed(
            strace=self.strace or other.strace,
            bpftrace=self.bpftrace or other.bpftrace,
            perf=self.perf or other.perf,
            packets=self.packets or other.packets,
        )

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {s.observer: s.to_dict() for s in self.summaries()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Observed:
        """``observed`` of a results.json invocation; an unknown observer raises ValueError."""
        observed = cls()
        for name, record in data.items():
            kind = SUMMARY_TYPES.get(str(name))
            if kind is None:
                raise ValueError(f"observed names an unknown observer {name!r}")
            if not isinstance(record, Mapping):
                raise ValueError(f"observed.{name} is not an object")
            observed.add(kind.from_dict(record))
        return observed
