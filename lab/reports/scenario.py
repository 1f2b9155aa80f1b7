"""Tables about one scenario: its verdicts and calibration findings, what the client
claimed, the receiver's, decoy's and verifier's records, its passes and tracing overhead.

    verdict_table(scenario)     # Table: clause | requirement | expected | observed | ...
    client_table(scenario)      # one column per invocation of the primary pass
    pass_table(scenario)        # one row per pass (collector)

The per-observer summaries (strace, bpftrace, perf, packets) are :mod:`lab.reports.observers`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lab.model import (
    CLAUSE_TITLES,
    CLAUSES,
    Invocation,
    ScenarioResult,
    Verdict,
)
from lab.reports.table import (
    NOT_OBSERVED,
    NOT_RECORDED,
    Table,
    fmt,
    fmt_field,
    fmt_ratio,
    fmt_seconds,
)


def outcome_word(outcome: str | None) -> str:
    return "no expectation" if outcome is None else outcome


def agreement_word(verdict: Verdict) -> str:
    if verdict.expected is None:
        return "no expectation"
    agrees = verdict.agrees
    if agrees is None:
        return NOT_OBSERVED
    return "agrees" if agrees else "DISAGREES"


def finding_word(met: bool | None) -> str:
    if met is None:
        return NOT_OBSERVED
    return "met" if met else "NOT MET"


def _invocations(scenario: ScenarioResult) -> list[Invocation]:
    primary = scenario.primary
    return [] if primary is None else list(primary.invocations)


def _header(scenario: ScenarioResult, first: str) -> list[str]:
    return [first] + [f"invocation {inv.index}" for inv in _invocations(scenario)]


def records_note(scenario: ScenarioResult) -> str:
    primary = scenario.primary
    if primary is None:
        return "No pass ran, so there are no client, receiver or verifier records."
    name = "untraced pass (collector none)" if primary.collector == "none" else primary.collector
    return (
        f"Client, receiver, decoy and verifier records come from the {name}; the other passes "
        "are summarised in the pass table."
    )


def refused_text(refused: Mapping[str, Any] | None) -> str:
    """The sandbox's record of refused system calls, as recorded (lab.sandbox.seccomp)."""
    if refused is None:
        return "not recorded"
    if not refused.get("observed"):
        return f"not observed: {refused.get('reason') or 'no observer'}"
    calls = refused.get("calls") or {}
    if not calls:
        return "none"
    shown = ", ".join(f"{name} x{count}" for name, count in sorted(calls.items()))
    lost = refused.get("suppressed") or 0
    return shown + (f" (and {lost} record(s) the kernel dropped)" if lost else "")


def completion_text(completion: Mapping[str, Any] | None) -> str:
    """The completion event as words ("status ok"; "status failed, reason: ..."), never as
    JSON; the event verbatim is in results.json."""
    if completion is None:
        return NOT_RECORDED
    parts = [f"{key} {fmt(value)}" for key, value in completion.items() if key != "reason"]
    if "reason" in completion:
        parts.append(f"reason: {fmt(completion['reason'])}")
    return ", ".join(p for p in parts if not p.startswith("event complete")) or "complete"


def client_table(scenario: ScenarioResult) -> Table:
    invs = _invocations(scenario)

    def row(label: str, cells: Iterable[str]) -> list[str]:
        return [label, *cells]

    rows = [
        row("exit status", (fmt(i.claim.exit_status) for i in invs)),
        row(
            "completion event",
            (completion_text(i.claim.completion) for i in invs),
        ),
        row("claims success", (fmt(i.claim.claimed_success) for i in invs)),
        row("events printed", (fmt(i.claim.event_count or len(i.claim.events)) for i in invs)),
        row("non-JSON stdout lines", (fmt(i.claim.unparsed_lines) for i in invs)),
        row("timed out", (fmt(i.claim.timed_out) for i in invs)),
        row(
            "killed by signal",
            (
                "no" if i.claim.killed_by_signal is None else fmt(i.claim.killed_by_signal)
                for i in invs
            ),
        ),
        row("wall time", (fmt_seconds(i.claim.wall_s) for i in invs)),
        row("CPU time", (fmt_seconds(i.claim.cpu_s) for i in invs)),
        row(
            "contract v1 violations",
            ("; ".join(i.claim.contract_violations) or "none" for i in invs),
        ),
    ]
    if any(i.sandbox.refused is not None for i in invs):
        rows.append(row("system calls refused", (refused_text(i.sandbox.refused) for i in invs)))
    return Table(_header(scenario, "client claim"), rows)


def receiver_table(scenario: ScenarioResult) -> Table:
    invs = _invocations(scenario)
    fields: list[tuple[str, str]] = [
        ("connections", "connections"),
        ("payload bytes consumed", "payload_bytes_consumed"),
        ("upload attempts", "upload_attempts"),
        ("committed", "committed"),
        ("rejected uploads", "rejected_uploads"),
        ("dropped transfers", "dropped_transfers"),
        ("HAVE queries", "have_queries"),
        ("HAVE answers", "have_answers"),
        ("held the source at start", "held_source_at_start"),
        ("PUT decisions", "decisions"),
        ("protocol errors", "protocol_errors"),
    ]
    rows = [[label, *(fmt(getattr(i.receiver, attr)) for i in invs)] for label, attr in fields]
    return Table(_header(scenario, "receiver record"), rows)


def decoy_table(scenario: ScenarioResult) -> Table:
    invs = _invocations(scenario)
    rows = [
        ["connections", *(fmt(i.decoy.connections) for i in invs)],
        ["peers", *(fmt(i.decoy.peers) for i in invs)],
        ["bytes received", *(fmt(i.decoy.bytes_received) for i in invs)],
    ]
    return Table(_header(scenario, "decoy record"), rows)


def verifier_table(scenario: ScenarioResult) -> Table:
    invs = _invocations(scenario)
    rows = [
        ["backup exists", *(fmt(i.verifier.backup_exists) for i in invs)],
        ["matches source", *(fmt(i.verifier.matches_source) for i in invs)],
        [
            "backup SHA-256",
            *(
                fmt(i.verifier.backup_sha256) if i.verifier.backup_exists else "no backup"
                for i in invs
            ),
        ],
        ["source SHA-256", *(fmt(i.verifier.source_sha256) for i in invs)],
        [
            "backup size",
            *(
                fmt(i.verifier.backup_size) if i.verifier.backup_exists else "no backup"
                for i in invs
            ),
        ],
        ["checked at", *(fmt(i.verifier.checked_at) for i in invs)],
    ]
    notes: list[str] = []
    primary = scenario.primary
    if primary is not None and primary.preload_sha256 is not None:
        notes.append(
            f"Older backup pre-loaded before the first invocation: {primary.preload_sha256}"
        )
    return Table(_header(scenario, "verifier check"), rows, notes)


def verdict_table(scenario: ScenarioResult) -> Table:
    rows = []
    for clause in CLAUSES:
        v = scenario.verdicts.get(clause)
        if v is None:
            rows.append([clause, CLAUSE_TITLES[clause], "-", NOT_RECORDED, "-", "-", "-"])
            continue
        rows.append(
            [
                clause,
                CLAUSE_TITLES[clause],
                outcome_word(v.expected),
                v.observed,
                agreement_word(v),
                fmt(v.evidence),
                v.reason,
            ]
        )
    return Table(
        ["clause", "requirement", "expected", "observed", "agreement", "evidence", "why"], rows
    )


def findings_table(scenario: ScenarioResult, *, observed_only: bool = False) -> Table:
    """One row per calibration finding; ``observed_only`` keeps the met and not-met rows and
    says in one note, per observer and reason, how many were not observed (the PDF's form;
    report.md has every row)."""
    rows = []
    unobserved: dict[tuple[str, str], int] = {}
    for f in scenario.findings:
        if observed_only and f.met is None:
            key = (f.observer, f.reason or "no reason recorded")
            unobserved[key] = unobserved.get(key, 0) + 1
            continue
        rows.append(
            [
                f.observer,
                "all" if f.invocation is None else str(f.invocation),
                f.key,
                fmt_field(f.key, f.expected),
                NOT_OBSERVED
                if f.met is None and f.observed is None
                else fmt_field(f.key, f.observed),
                finding_word(f.met),
                f.reason or "",
            ]
        )
    notes = [] if rows or unobserved else ["This scenario declares no calibration findings."]
    if unobserved:
        counts = "; ".join(f"{name} {n} ({why})" for (name, why), n in unobserved.items())
        notes.append(
            f"Not observed ({sum(unobserved.values())} expectations, never counted as met or "
            f"not met), by observer and reason: {counts}. Every row is in report.md."
        )
    return Table(
        ["observer", "invocation", "key", "expected", "observed", "result", "reason"], rows, notes
    )


def pass_table(scenario: ScenarioResult) -> Table:
    rows = []
    width = max((len(p.invocations) for p in scenario.passes), default=0)
    for p in scenario.passes:
        cells = []
        for inv in p.invocations:
            verdict = (
                "backup matches source"
                if inv.verifier.matches_source
                else ("backup differs" if inv.verifier.backup_exists else "no backup")
            )
            cells.append(
                f"exit {fmt(inv.claim.exit_status)}; {inv.receiver.connections} receiver "
                f"connection(s); {inv.receiver.payload_bytes_consumed:,} payload bytes; "
                f"{verdict}; wall {fmt_seconds(inv.claim.wall_s)}"
            )
        cells += ["-"] * (width - len(cells))
        rows.append([p.collector, *cells, p.error or "-"])
    header = ["pass", *(f"invocation {i + 1}" for i in range(width)), "pass error"]
    return Table(header, rows)


def overlap_note(scenarios: Iterable[ScenarioResult]) -> list[str]:
    """A note for tracing-overhead figures whose untraced side ran beside another pass."""
    if not any(p.concurrent for s in scenarios for p in s.passes if p.collector == "none"):
        return []
    return [
        "The untraced pass ran beside another pass (--jobs): the untraced client times these "
        "ratios divide by were measured with another pass on the cores, so the ratios are "
        "indications at best; rerun with --jobs 1 for them."
    ]


def overhead_table(s: ScenarioResult) -> Table | None:
    """The model's tracing-overhead figures for one scenario (``ScenarioResult.overhead``)."""
    overhead = s.overhead()
    if not overhead:
        return None
    rows = [
        [
            o.collector,
            fmt_seconds(o.untraced_wall_s),
            fmt_seconds(o.traced_wall_s),
            fmt_ratio(o.wall_ratio),
            fmt_ratio(o.cpu_ratio),
        ]
        for o in overhead
    ]
    return Table(
        ["collector", "untraced wall", "traced wall", "wall ratio", "CPU ratio"],
        rows,
        [
            "Traced command / untraced client time over the invocations of each pass "
            "(the tracer's start-up and its own CPU included).",
            *overlap_note([s]),
        ],
    )
