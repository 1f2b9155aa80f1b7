"""Tables of what the independent observers (strace, bpftrace, perf, packets) recorded
about one scenario, read from the per-invocation summaries merged over its passes.

    for name in observer_names(scenario):
        observer_summary_table(scenario, name)   # one row per summary key
    unobserved_table(scenario)                   # observers that saw nothing, and why
    probe_maps(scenario)                         # bpftrace map values, verbatim

An observer that did not run reads "not observed", with its reason; never a zero.
"""

from __future__ import annotations

from dataclasses import fields

from lab.model import (
    OBSERVERS,
    PROCESS_COLLECTORS,
    PacketFlow,
    ScenarioResult,
)
from lab.reports.table import NOT_OBSERVED, NOT_RECORDED, Table, fmt, fmt_field, fmt_summary

#: Preferred row order of each observer's summary; other keys follow, sorted.
SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "strace": (
        "source_bytes_read",
        "source_reads",
        "connects",
        "destinations",
        "sent_bytes",
        "syscalls",
        "exit_status",
    ),
    "bpftrace": (
        "hash_calls",
        "send_payload_calls",
        "busy_wait_calls",
        "connects",
        "destinations",
        "read_bytes",
        "sent_bytes",
        "switches_out",
    ),
    "perf": ("event", "event_reason", "samples", "lost_samples", "top_client_symbol"),
    "packets": (
        "packets",
        "received_by_filter",
        "dropped_by_kernel",
        "dropped_by_interface",
        "payload_bytes_to_receiver",
        "payload_bytes_to_decoy",
        "payload_bytes_from_receiver",
        "destinations",
    ),
}


#: the flows table's columns: a ``PacketFlow`` record's keys
FLOW_COLUMNS = tuple(f.name for f in fields(PacketFlow))

#: Summary keys drawn as their own block or table rather than as one cell.
STRUCTURED_KEYS = frozenset({"maps", "top_symbols", "flows"})


def observer_names(scenario: ScenarioResult) -> list[str]:
    """Independent observers other than the lab's own records, in report order."""
    seen: set[str] = set()
    for inv in scenario.invocations():
        seen |= set(inv.observed.names()) | set(inv.missing)
    for p in scenario.passes:
        if p.collector in PROCESS_COLLECTORS:
            seen.add(p.collector)
    order = [n for n in OBSERVERS if n in seen and n not in ("client", "receiver", "decoy")]
    return order + sorted(seen - set(OBSERVERS))


def observed_any(scenario: ScenarioResult, name: str) -> bool:
    """Whether observer ``name`` produced a summary for at least one invocation."""
    return any(name in inv.observed for inv in scenario.invocations())


def unobserved_table(scenario: ScenarioResult) -> Table | None:
    """Observers that observed no invocation of this scenario, with why (never zeros)."""
    rows: list[list[str]] = []
    for name in observer_names(scenario):
        if name == "verifier" or observed_any(scenario, name):
            continue
        reasons: list[str] = []
        for inv in scenario.invocations():
            why = inv.missing.get(name) or _run_level_reason(scenario, name)
            if why not in reasons:
                reasons.append(why)
        rows.append([name, NOT_OBSERVED, "; ".join(reasons) or "no reason recorded"])
    if not rows:
        return None
    return Table(["observer", "invocations", "why"], rows)


def observer_summary_table(scenario: ScenarioResult, name: str) -> Table:
    """One row per summary key, one column per invocation; "not observed" where the observer
    did not run for that invocation, with the reason as a note. The rows are the keys of each
    summary's results.json record (what a reader looks up there), in ``SUMMARY_KEYS`` order."""
    merged = scenario.invocations()
    summaries = [
        None if (summary := inv.observed.get(name)) is None else summary.to_dict() for inv in merged
    ]
    keys: list[str] = []
    present = [s for s in summaries if s is not None]
    for key in SUMMARY_KEYS.get(name, ()):
        if any(key in s for s in present):
            keys.append(key)
    extra = {k for s in present for k in s} - set(keys) - STRUCTURED_KEYS
    keys += sorted(extra)
    rows: list[list[str]] = []
    for key in keys:
        cells = []
        for s in summaries:
            if s is None:
                cells.append(NOT_OBSERVED)
            elif key not in s:
                cells.append(NOT_RECORDED)
            else:
                cells.append(fmt_summary(key, s[key]))
        rows.append([key, *cells])
    notes: list[str] = []
    for inv, s in zip(merged, summaries, strict=True):
        if s is None:
            why = inv.missing.get(name) or _run_level_reason(scenario, name)
            notes.append(f"{name} did not observe invocation {inv.index}: {why}")
    if not rows and not notes:
        notes.append(f"{name} recorded no summary for this scenario.")
    header = [name] + [f"invocation {inv.index}" for inv in merged]
    return Table(header, rows, notes)


def _run_level_reason(scenario: ScenarioResult, name: str) -> str:
    for p in scenario.passes:
        if p.collector == name and p.error:
            return p.error
    return "no reason recorded"


def probe_maps(scenario: ScenarioResult) -> list[tuple[int, str]]:
    """The bpftrace final map values verbatim, per invocation, as the probe printed them."""
    blocks: list[tuple[int, str]] = []
    for inv in scenario.invocations():
        bpf = inv.observed.bpftrace
        if bpf is not None:
            maps = bpf.maps
            blocks.append((inv.index, "\n".join(f"{k}: {maps[k]}" for k in sorted(maps))))
    return blocks


def top_symbols_table(scenario: ScenarioResult) -> Table | None:
    rows: list[list[str]] = []
    for inv in scenario.invocations():
        perf = inv.observed.perf
        for sym in () if perf is None else perf.top_symbols:
            rows.append(
                [
                    str(inv.index),
                    sym.symbol,
                    fmt(sym.dso),
                    f"{sym.inclusive_pct:.1f}",
                    f"{sym.self_pct:.1f}",
                ]
            )
    if not rows:
        return None
    return Table(["invocation", "symbol", "object", "inclusive %", "self %"], rows)


def flows_table(scenario: ScenarioResult) -> Table | None:
    rows: list[list[str]] = []
    for inv in scenario.invocations():
        packets = inv.observed.packets
        for flow in () if packets is None else packets.flows:
            rows.append([str(inv.index), *(fmt_field(k, v) for k, v in flow.to_dict().items())])
    if not rows:
        return None
    return Table(["invocation", *FLOW_COLUMNS], rows)
