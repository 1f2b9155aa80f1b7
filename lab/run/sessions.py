"""A pass's session collectors (the packet capture, bpftrace), started before its first
invocation and stopped after its last however the pass ends (``lab.run.runner``'s passes).

    with pass_sessions(pctx, "bpftrace", p, None, cell, packets="required",
                       observers=observers) as found:
        ...                              # the invocations
    found["packets"]                     # {invocation: CollectorOutput}, or why none ran
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from lab.collectors import is_session, session_collector
from lab.collectors.base import CollectorOutput, PassContext, SessionCollector
from lab.errors import CollectorError, LabError
from lab.model import ObserverStatus, Pass
from lab.run.phases import SharedSlot


@contextlib.contextmanager
def pass_sessions(
    pctx: PassContext,
    collector_name: str,
    p: Pass,
    shared: SharedSlot | None,
    cell: Any,
    *,
    packets: str,
    observers: dict[str, ObserverStatus],
) -> Iterator[dict[str, dict[int, CollectorOutput] | str]]:
    """Start the pass's session collectors (the capture, bpftrace); stop them however the
    pass ends. Yields {name: outputs once stopped, or why it did not run}. A bpftrace
    pass of a shared phase (lab.run.phases) starts no bpftrace of its own when its box
    runs the inode the shared session's uprobes attached to: the phase attaches the
    session's outputs once it stops. ``packets``: the run's ``--packets``."""
    found: dict[str, dict[int, CollectorOutput] | str] = {}
    started: list[SessionCollector] = []
    try:
        why = packets_unavailable(packets, observers)
        if why is not None:
            found["packets"] = why
        else:
            from lab.collectors.packets import PacketCapture

            capture = PacketCapture()
            try:
                capture.start(pctx)
                started.append(capture)
            except CollectorError as exc:
                if packets == "required":
                    raise CollectorError(
                        f"{exc} Rerun with --packets best-effort or fix the capture "
                        "(python -m lab doctor)."
                    ) from exc
                found["packets"] = f"packet capture failed to start: {exc}"
        if shared is not None and cell.runs_inode_of(shared.client):
            p.session = shared.record
            if shared.error is not None:
                p.error = shared.error
        elif is_session(collector_name):
            tracer = session_collector(collector_name)()
            try:
                tracer.start(pctx)
                started.append(tracer)
            except LabError as exc:
                # a tracer that cannot attach fails its own pass, never the run
                p.error = f"{collector_name} could not start: {exc}"
        yield found
    finally:
        for session in reversed(started):
            found[session.name] = session.stop()


def packets_unavailable(packets: str, observers: dict[str, ObserverStatus]) -> str | None:
    """Why no capture runs beside a pass (None: one does)."""
    if packets == "off":
        return "packet capture off (--packets off)"
    status = observers.get("packets")
    if status is None or not status.available:
        why = status.reason if status is not None else "packets were not probed"
        return f"packet capture unavailable: {why}"
    return None
