"""The packet capture's per-invocation summary (``observed.packets`` of ``results.json``):
packets and payload bytes per flow, destinations, the kernel's drop counters. Re-exported by
:mod:`lab.model.observed`, beside the other observers' summaries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lab.model.fields import optional_float, optional_int, required_int, str_tuple


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
            port=required_int(data, "port"),
            role=str(data["role"]),
            direction=str(data["direction"]),
            packets=required_int(data, "packets"),
            payload_bytes=required_int(data, "payload_bytes"),
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
            packets=required_int(data, "packets"),
            payload_bytes_to_receiver=required_int(data, "payload_bytes_to_receiver"),
            payload_bytes_from_receiver=required_int(data, "payload_bytes_from_receiver"),
            payload_bytes_to_decoy=required_int(data, "payload_bytes_to_decoy"),
            payload_bytes_from_decoy=required_int(data, "payload_bytes_from_decoy"),
            connections_to_receiver=required_int(data, "connections_to_receiver"),
            connections_to_decoy=required_int(data, "connections_to_decoy"),
            retransmitted_bytes=required_int(data, "retransmitted_bytes"),
            flows=tuple(PacketFlow.from_dict(f) for f in data.get("flows") or ()),
            destinations=str_tuple(data, "destinations"),
            first_packet_at=optional_float(data, "first_packet_at"),
            last_packet_at=optional_float(data, "last_packet_at"),
            captured=optional_int(data, "captured"),
            received_by_filter=optional_int(data, "received_by_filter"),
            dropped_by_kernel=optional_int(data, "dropped_by_kernel"),
            dropped_by_interface=required_int(data, "dropped_by_interface"),
            counters_scope=str(data.get("counters_scope", "pass")),
            packets_outside_invocations=required_int(data, "packets_outside_invocations"),
            link_type=optional_int(data, "link_type"),
            interface=None if interface is None else str(interface),
            namespace=bool(data.get("namespace", False)),
            filter=None if bpf is None else str(bpf),
        )
