"""The kernel's and the wire's own events of one invocation, read back from the raw files
the observers kept, as :class:`lab.run.timeline.Sighting` rows for ``timeline.jsonl``.

- strace (``strace.txt``, epoch seconds with µs, ``-ttt``): the client's exec, connects,
  sends (``sendto``/``sendmsg``/``sendmmsg``, and writes on a socket) and its exit, only
  the client's part of the trace (not the sandbox's steps, :func:`client_calls`);
- bpftrace (its per-invocation cut, ``nsecs`` = CLOCK_MONOTONIC): every event line;
- the capture (the invocation's ``capture.pcap``, epoch stamps): SYN, FIN, RST and every
  segment that carries payload, and datagrams;
- perf (``perf.data``'s header, ``-k mono``): the first and the last sample, its window.

A flood is bounded: of each (source, event) the first :data:`KEPT` rows are kept and one
``summarised`` row (at the last one's time) counts the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lab.collectors.bpftrace_parse import parse_bpftrace
from lab.collectors.perf_header import sample_window
from lab.collectors.strace_parse import (
    ADDRESS_CALLS,
    client_calls,
    descriptor,
    destinations_in,
    is_socket,
    iter_syscalls,
    split_args,
)
from lab.model import ScenarioResult
from lab.run.timeline import MONOTONIC, REALTIME, Sighting, Timeline
from lab.sandbox.jail import GATED_EXECS, JAIL_EXECS

if TYPE_CHECKING:
    from lab.collectors.packets_pcap import Packet

PERF_DATA = "perf.data"
#: rows kept of each (source, event) per invocation before the rest are counted
KEPT = 20
#: characters of a system call's arguments kept in its row
ARGS_KEPT = 160
SEND_CALLS = frozenset({"write", "writev", "pwrite64", "pwritev", "pwritev2"})
EXIT_CALLS = frozenset({"exit", "exit_group"})


def bounded(sightings: Iterable[Sighting], kept: int = KEPT) -> list[Sighting]:
    """The first ``kept`` of each (source, event), then one row counting the rest."""
    out: list[Sighting] = []
    counts: dict[tuple[str, str], int] = {}
    last: dict[tuple[str, str], Sighting] = {}
    for s in sightings:
        key = (s.source, s.event)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] <= kept:
            out.append(s)
        else:
            last[key] = s
    for key, s in last.items():
        more = counts[key] - kept
        out.append(
            Sighting(
                s.source,
                s.event,
                s.clock,
                s.own_ns,
                s.own_text,
                s.clock_name,
                {"summarised": more, "why": f"{more} more {s.event} rows counted, not kept"},
            )
        )
    return out


def _epoch_ns(seconds: float) -> int:
    return round(seconds * 1_000_000) * 1000


def strace_sightings(text: str, client_pid: int | None, execs_before_client: int) -> list[Sighting]:
    calls, _ = iter_syscalls(text)
    if client_pid is not None:
        calls, _ = client_calls(calls, client_pid, execs_before_client, attached_execs=GATED_EXECS)
    rows: list[Sighting] = []
    for call in calls:
        if call.name in SEND_CALLS:
            args = split_args(call.args)
            fd = descriptor(args[0]) if args else None
            if fd is None or not is_socket(fd[1]):
                continue
        elif call.name not in ADDRESS_CALLS | EXIT_CALLS | {"execve"}:
            continue
        fields: dict[str, object] = {"pid": call.pid, "call": call.name, "ret": call.ret}
        if call.errno:
            fields["errno"] = call.errno
        if call.name in ADDRESS_CALLS:
            fields["destinations"] = destinations_in(call.args)
        fields["args"] = call.args[:ARGS_KEPT]
        rows.append(
            Sighting(
                "strace",
                call.name,
                REALTIME,
                _epoch_ns(call.ts),
                f"{call.ts:.6f}",
                "strace -ttt (CLOCK_REALTIME, µs, call entry)",
                fields,
            )
        )
    return bounded(rows)


def bpftrace_sightings(text: str) -> list[Sighting]:
    rows = [
        Sighting(
            "bpftrace",
            e.kind,
            MONOTONIC,
            e.nsecs,
            str(e.nsecs),
            "bpftrace nsecs (CLOCK_MONOTONIC, ns)",
            {"pid": e.pid, **e.fields},
        )
        for e in parse_bpftrace(text).events
    ]
    return bounded(rows)


def _segment_event(p: Packet) -> str | None:
    if p.proto != "tcp":
        return "datagram" if p.proto == "udp" else f"icmp {p.flags}"
    if p.syn:
        return "SYN-ACK" if p.ack else "SYN"
    if "R" in p.flags:
        return "RST"
    if "F" in p.flags:
        return "FIN"
    if p.payload > 0:
        return "payload"
    return None


def packet_sightings(data: bytes) -> list[Sighting]:
    # dpkt takes ~30 ms to import, and an untraced run without a capture never needs it
    from lab.collectors.packets_pcap import read_pcap

    _, packets = read_pcap(data)
    rows: list[Sighting] = []
    for p in packets:
        event = _segment_event(p)
        if event is None:
            continue
        rows.append(
            Sighting(
                "packets",
                event,
                REALTIME,
                _epoch_ns(p.ts),
                f"{p.ts:.6f}",
                "pcap timestamp (CLOCK_REALTIME, µs)",
                {
                    "src": p.source,
                    "dst": p.destination,
                    "flags": p.flags,
                    "payload_bytes": p.payload,
                },
            )
        )
    return bounded(rows)


def perf_sightings(path: Path) -> list[Sighting]:
    """perf's sample window: its first and last sample, when perf stamped them on the time
    base (``-k mono``); perf's own clock (``perf_clock``) cannot be placed, so nothing."""
    window = sample_window(path)
    if window is None or window.clock != "CLOCK_MONOTONIC":
        return []
    clock = "perf.data sample time (-k mono: CLOCK_MONOTONIC, ns)"
    span = {"window_ns": window.last_ns - window.first_ns}
    return [
        Sighting(
            "perf", "first-sample", MONOTONIC, window.first_ns, str(window.first_ns), clock, span
        ),
        Sighting(
            "perf", "last-sample", MONOTONIC, window.last_ns, str(window.last_ns), clock, span
        ),
    ]


def invocation_sightings(
    run_dir: Path,
    artifacts: dict[str, list[str]],
    *,
    client_pid: int | None,
    execs_before_client: int,
) -> Iterator[Sighting]:
    """The sightings of one invocation from the raw files it lists (relative paths)."""
    for rel in artifacts.get("strace", []):
        if rel.endswith("strace.txt"):
            text = (run_dir / rel).read_text(encoding="utf-8", errors="replace")
            yield from strace_sightings(text, client_pid, execs_before_client)
    for rel in artifacts.get("bpftrace", []):
        # the invocation's own cut (inv<N>/bpftrace.txt), not the session's whole output
        if "/inv" in rel and rel.endswith("bpftrace.txt"):
            text = (run_dir / rel).read_text(encoding="utf-8", errors="replace")
            yield from bpftrace_sightings(text)
    for rel in artifacts.get("perf", []):
        if rel.endswith(PERF_DATA):
            yield from perf_sightings(run_dir / rel)
    for rel in artifacts.get("packets", []):
        if "/inv" in rel and rel.endswith(".pcap"):
            yield from packet_sightings((run_dir / rel).read_bytes())


def add_observed(timeline: Timeline, run_dir: Path, result: ScenarioResult) -> None:
    """The kernel's and the wire's own events of every invocation of ``result`` (strace,
    bpftrace, the capture), from the raw files its observers kept."""
    for p in result.passes:
        for inv in p.invocations:
            labels = {
                "scenario": result.name,
                "repetition": result.repetition,
                "pass": p.collector,
                "invocation": inv.index,
            }
            pid = inv.sandbox.main_pid if inv.sandbox is not None else None
            found = invocation_sightings(
                run_dir,
                inv.artifacts,
                client_pid=pid,
                execs_before_client=JAIL_EXECS if pid is not None else 0,
            )
            timeline.add_sightings(found, labels)
