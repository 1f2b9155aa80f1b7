"""Wording and table rows shared by the Markdown and PDF reports, so both views say the same
thing about the same :class:`~lab.model.RunResult`.

Every function here is pure: it reads the model and returns strings or :class:`Table` rows
of strings; the presenters only decide how to draw them.

    from lab.reports import text
    text.calibration_statement(run.calibration)   # "41 of 44 expectations met, ..."
    text.repetition_wording(2, 3)                  # "reliability 2/3"
    table = text.receiver_table(scenario)          # Table(header=[...], rows=[[...], ...])

A missing figure is never drawn as a zero: an observer that did not run reads "not observed"
(with its reason beside it), a key the model does not hold reads "not recorded".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lab.model import (
    CLAUSE_TITLES,
    CLAUSES,
    OBSERVERS,
    PROCESS_COLLECTORS,
    Calibration,
    Invocation,
    RunResult,
    ScenarioResult,
    Verdict,
)
from lab.reports import REPORT_FILES, ArchivedFile

NOT_RECORDED = "not recorded"
NOT_OBSERVED = "not observed"

#: The article's warning, kept as the report's own sentence: the runner's exit status speaks
#: about the instrument, not about the backups.
EXIT_STATUS_STATEMENT = (
    "The runner's exit status is not a statement that every backup was correct. "
    "Exit status 0 means that every scenario executed and the instrument's observations "
    "matched the scenario expectations, including the scenarios that are expected to fail "
    "clauses. Read each scenario's independent verification result below."
)

EVALUATION_EXIT_STATEMENT = (
    "For this candidate evaluation, the exit status is 0 only if every contract clause "
    "passed in every repetition of every condition; intermediate errors are kept as evidence "
    "but never decide it. The seeded scenarios in this report are the instrument check that "
    "ran first; they fail clauses on purpose."
)


def evaluation_headline(evaluation: Mapping[str, Any] | None) -> str | None:
    """One line for the top of the report: the candidate's verified result, k/N per clause."""
    if evaluation is None:
        return None
    status = str(evaluation.get("status", NOT_RECORDED)).upper()
    line = f"Candidate evaluation {fmt(evaluation.get('evaluation_id'))}: {status}"
    if evaluation.get("status_reason"):
        line += f" — {evaluation['status_reason']}"
    clauses = evaluation.get("clauses")
    if isinstance(clauses, Mapping) and clauses:
        parts = [
            f"{c} {clauses[c].get('pass')}/{clauses[c].get('total')}"
            for c in sorted(clauses)
            if isinstance(clauses[c], Mapping)
        ]
        line += ". Passed per clause: " + ", ".join(parts)
    return line + "."


#: What each observer cannot see (from the first seed article and the brief).
OBSERVER_LIMITS: dict[str, str] = {
    "client": (
        "The client's own claim (exit status, events). It is what is being checked: it is "
        "never evidence for C1-C5, and C6 compares it with the verifier."
    ),
    "receiver": (
        "Counts payload bytes the application consumed and its own decisions. A successful "
        "send can hand data to the kernel before the receiver consumes it, so these counts "
        "differ from packet payload counts."
    ),
    "decoy": (
        "Records only connections that reach its own port. It cannot see other destinations; "
        "those need the syscall trace, eBPF or the packet capture."
    ),
    "verifier": (
        "Compares the receiver's saved file with the source by SHA-256. It does not exercise "
        "a separate restore command or prove survival through power loss."
    ),
    "strace": (
        "Counts logical reads of the source file, not physical disk traffic: the kernel may "
        "serve them from memory. Tracing slows the client, so traced timings include the "
        "tracer's overhead."
    ),
    "bpftrace": (
        "An entry counter shows that control reached a function, not that the function "
        "returned a correct answer. Read and send counters cover all of the client's "
        "descriptors, not only the source file or the upload payload."
    ),
    "perf": (
        "Sampling, not a recording of every instruction: short-lived activity can be missed "
        "and an unsampled function may still have run. The recorded CPU time includes "
        "collector overhead."
    ),
    "packets": (
        "Sees traffic at the capture point only (loopback, the fixture ports). Zero kernel "
        "drops is loss accounting, not proof that every packet was seen. Payload bytes on "
        "the wire include retries and differ from bytes the receiver consumed."
    ),
}

GENERAL_LIMITS: tuple[str, ...] = (
    "The observers are separate from the client's reporting, but they share a host with it "
    "and were built as part of the same project: this is not an independent third-party "
    "audit.",
    "Tracing changes execution. Traced passes are not performance benchmarks; timing "
    "comparisons use the untraced pass (collector none).",
    "Observations of one scenario come from separate passes (one process collector per "
    "pass): they corroborate each other; they are not one combined trace.",
    "The timeline aligns client claims, receiver events and verifier checks; kernel and CPU "
    "traces are separate artifacts with their own clocks.",
    "The seeded behaviors check the instrument. They do not measure how often an agent "
    "introduces such defects.",
    "The fixture omits TLS, compression, multi-file snapshots and source changes during transfer.",
)

#: Environment keys never shown in a report (identifying the host is not evidence).
HIDDEN_ENVIRONMENT_KEYS = frozenset({"hostname", "host", "user", "username", "home", "cwd"})

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
#: Summary keys drawn as their own block or table rather than as one cell.
STRUCTURED_KEYS = frozenset({"maps", "top_symbols", "flows"})


@dataclass
class Table:
    """A header and rows of plain strings; ``notes`` are sentences drawn under the table."""

    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- formatting


def fmt(value: Any) -> str:
    """One cell: thousands separators for integers, "not recorded" for None."""
    if value is None:
        return NOT_RECORDED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, str):
        return mask_host_path(value)
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value) if value else "none"
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, separators=(", ", ": "), default=str)
    return str(value)


def fmt_summary(key: str, value: Any) -> str:
    """A collector summary value: epoch timestamps (keys ending ``_at``) as UTC time."""
    if key.endswith("_at") and isinstance(value, int | float) and not isinstance(value, bool):
        when = datetime.fromtimestamp(float(value), tz=UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    return fmt(value)


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return NOT_RECORDED
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return f"{value:.3f} s"


def fmt_ratio(value: float | None) -> str:
    """A ratio such as traced/untraced time; "N/A" where it is undefined."""
    return "N/A" if value is None else f"{value:.2f}x"


def mask_host_path(value: str) -> str:
    """Reports carry no host paths: an absolute path is cut down to its last component."""
    if value.startswith("/") and " " not in value and len(value) > 1:
        return ".../" + value.rstrip("/").rsplit("/", 1)[-1]
    return value


def calibration_statement(cal: Calibration) -> str:
    return (
        f"{cal.met} of {cal.total} expectations met, {cal.not_met} not met, "
        f"{cal.not_observed} not observed"
    )


def run_status_statement(run: RunResult) -> str:
    """What the runner's exit status reflects for this run, in words."""
    executed = "yes" if run.executed else "no"
    calibrated = "yes" if run.calibrated else "no"
    return (
        f"Every scenario executed: {executed}. Observations that disagree with their "
        f"expectation: {run.calibration.not_met}. The instrument matched every expectation "
        f"it could observe: {calibrated}."
    )


def repetition_wording(k: int, n: int) -> str:
    """How strong a claim ``k`` successes out of ``n`` repetitions support (second article:
    one run shows capability, never reliability)."""
    if n <= 0:
        return "no repetition ran"
    if n == 1:
        return "capability demonstrated" if k >= 1 else "capability not demonstrated"
    if n == 2:
        return f"{k}/2 repetitions (too few for a reliability claim)"
    return f"reliability {k}/{n}"


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


def signing_statement(signing: Mapping[str, Any]) -> str | None:
    """The plain sentence a reviewer needs about the key, or None when nothing to say."""
    if not signing:
        return (
            "The signing identity was not recorded when this report was written; check "
            "SHA256SUMS.sig against the public key shipped with the archive."
        )
    if signing.get("ephemeral"):
        return (
            "The signing key was generated for this run only (ephemeral): the signature shows "
            "the archive has not changed since it was signed, but authenticity - who produced "
            "it - is not established."
        )
    return None


# --------------------------------------------------------------------------- run level


def scenario_label(scenario: ScenarioResult, run: RunResult) -> str:
    """The scenario's name, with its repetition when the name occurs more than once."""
    same = sum(1 for s in run.scenarios if s.name == scenario.name)
    return scenario.name if same <= 1 else f"{scenario.name} #{scenario.repetition}"


def identity_rows(run: RunResult) -> list[tuple[str, str]]:
    env = run.environment
    rows: list[tuple[str, str]] = [
        ("run id", run.run_id),
        ("started", run.started_at),
        ("finished", run.finished_at),
        ("git commit", fmt(env.get("git_commit"))),
    ]
    image = env.get("image")
    if isinstance(image, Mapping):
        rows.append(("container image", "; ".join(f"{k}: {fmt(image[k])}" for k in sorted(image))))
    elif image is None and "image" in env:
        rows.append(("container image", "not run in a container"))
    else:
        rows.append(("container image", fmt(image)))
    rows += [
        ("client binary SHA-256", fmt(env.get("client_sha256"))),
        ("kernel", fmt(env.get("kernel"))),
        ("CPU model", fmt(env.get("cpu_model"))),
    ]
    tools = env.get("tool_versions")
    if isinstance(tools, Mapping) and tools:
        rows.append(("tool versions", "; ".join(f"{k} {fmt(tools[k])}" for k in sorted(tools))))
    else:
        rows.append(("tool versions", NOT_RECORDED))
    known = {"git_commit", "image", "client_sha256", "kernel", "cpu_model", "tool_versions"}
    for key in sorted(env):
        if key in known or key.lower() in HIDDEN_ENVIRONMENT_KEYS:
            continue
        rows.append((key.replace("_", " "), fmt(env[key])))
    rows.append(("collectors used", collectors_used(run)))
    rows.append(("collectors unavailable", collectors_unavailable(run)))
    for key in sorted(run.options):
        rows.append((f"option {key}", fmt(run.options[key])))
    signing = run.signing
    rows.append(("signing key fingerprint", fmt(signing.get("fingerprint"))))
    if "keynum" in signing:
        rows.append(("signing key number", fmt(signing.get("keynum"))))
    if "ephemeral" in signing:
        rows.append(("ephemeral signing key", fmt(bool(signing.get("ephemeral")))))
    return rows


def collectors_used(run: RunResult) -> str:
    """The passes that ran, and whether packet capture ran beside them."""
    ran = {p.collector for s in run.scenarios for p in s.passes}
    order = ("none", *PROCESS_COLLECTORS)
    collectors = [c for c in order if c in ran] + sorted(ran - set(order))
    if not collectors:
        return "none (no pass ran)"
    words = [("none (untraced)" if c == "none" else c) for c in collectors]
    captured = any(
        "packets" in inv.observed for s in run.scenarios for p in s.passes for inv in p.invocations
    )
    text = ", ".join(words)
    return text + ("; packet capture beside the passes" if captured else "; no packet capture")


def collectors_unavailable(run: RunResult) -> str:
    missing = [
        f"{name}: {status.reason or 'no reason recorded'}"
        for name, status in sorted(run.observers.items())
        if not status.available
    ]
    return "; ".join(missing) if missing else "none"


def observer_table(run: RunResult) -> Table:
    rows: list[list[str]] = []
    names = [n for n in OBSERVERS if n in run.observers] + sorted(
        n for n in run.observers if n not in OBSERVERS
    )
    for name in names:
        status = run.observers[name]
        detail = "; ".join(f"{k}: {fmt(status.detail[k])}" for k in sorted(status.detail))
        why = status.reason or ""
        rows.append(
            [
                name,
                "available" if status.available else "UNAVAILABLE",
                "; ".join(x for x in (why, detail) if x) or "-",
                OBSERVER_LIMITS.get(name, NOT_RECORDED),
            ]
        )
    for name in OBSERVERS:
        if name not in run.observers and name in ("client", "receiver", "decoy", "verifier"):
            rows.append([name, "always (part of the lab)", "-", OBSERVER_LIMITS[name]])
    return Table(["observer", "status", "reason / detail", "what it cannot see"], rows)


def matrix_cell(verdict: Verdict | None) -> str:
    """Plain-text matrix cell: observed outcome, then the expectation when it differs."""
    if verdict is None:
        return NOT_RECORDED
    if verdict.expected is None:
        return f"{verdict.observed} (no expectation)"
    agrees = verdict.agrees
    if agrees is None:
        return f"{verdict.observed} (expected {verdict.expected})"
    if agrees:
        return f"{verdict.observed} = expected"
    return f"{verdict.observed} - MISMATCH, expected {verdict.expected}"


# --------------------------------------------------------------------------- per scenario


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


def client_table(scenario: ScenarioResult) -> Table:
    invs = _invocations(scenario)

    def row(label: str, cells: Iterable[str]) -> list[str]:
        return [label, *cells]

    rows = [
        row("exit status", (fmt(i.claim.exit_status) for i in invs)),
        row(
            "completion event",
            (NOT_RECORDED if i.claim.completion is None else fmt(i.claim.completion) for i in invs),
        ),
        row("claims success", (fmt(i.claim.claimed_success) for i in invs)),
        row("events printed", (fmt(len(i.claim.events)) for i in invs)),
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


def observer_names(scenario: ScenarioResult) -> list[str]:
    """Independent observers other than the lab's own records, in report order."""
    seen: set[str] = set()
    for row in scenario.merged_invocations():
        seen |= set(row["observed"]) | set(row["missing"])
    for p in scenario.passes:
        if p.collector in PROCESS_COLLECTORS:
            seen.add(p.collector)
    order = [n for n in OBSERVERS if n in seen and n not in ("client", "receiver", "decoy")]
    return order + sorted(seen - set(OBSERVERS))


def observed_any(scenario: ScenarioResult, name: str) -> bool:
    """Whether observer ``name`` produced a summary for at least one invocation."""
    return any(name in row["observed"] for row in scenario.merged_invocations())


def unobserved_table(scenario: ScenarioResult) -> Table | None:
    """Observers that observed no invocation of this scenario, with why (never zeros)."""
    rows: list[list[str]] = []
    for name in observer_names(scenario):
        if name == "verifier" or observed_any(scenario, name):
            continue
        reasons: list[str] = []
        for row in scenario.merged_invocations():
            why = row["missing"].get(name) or _run_level_reason(scenario, name)
            if why not in reasons:
                reasons.append(why)
        rows.append([name, NOT_OBSERVED, "; ".join(reasons) or "no reason recorded"])
    if not rows:
        return None
    return Table(["observer", "invocations", "why"], rows)


def observer_summary_table(scenario: ScenarioResult, name: str) -> Table:
    """One row per summary key, one column per invocation; "not observed" where the observer
    did not run for that invocation, with the reason as a note."""
    merged = scenario.merged_invocations()
    summaries: list[Mapping[str, Any] | None] = [row["observed"].get(name) for row in merged]
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
    for row, s in zip(merged, summaries, strict=True):
        if s is None:
            why = row["missing"].get(name) or _run_level_reason(scenario, name)
            notes.append(f"{name} did not observe invocation {row['index']}: {why}")
    if not rows and not notes:
        notes.append(f"{name} recorded no summary for this scenario.")
    header = [name] + [f"invocation {row['index']}" for row in merged]
    return Table(header, rows, notes)


def _run_level_reason(scenario: ScenarioResult, name: str) -> str:
    for p in scenario.passes:
        if p.collector == name and p.error:
            return p.error
    return "no reason recorded"


def probe_maps(scenario: ScenarioResult) -> list[tuple[int, str]]:
    """The bpftrace final map values verbatim, per invocation, as the probe printed them."""
    blocks: list[tuple[int, str]] = []
    for row in scenario.merged_invocations():
        summary = row["observed"].get("bpftrace")
        if not summary or not isinstance(summary.get("maps"), Mapping):
            continue
        maps = summary["maps"]
        blocks.append((row["index"], "\n".join(f"{k}: {maps[k]}" for k in sorted(maps))))
    return blocks


def top_symbols_table(scenario: ScenarioResult) -> Table | None:
    rows: list[list[str]] = []
    for row in scenario.merged_invocations():
        perf = row["observed"].get("perf")
        if not perf or not isinstance(perf.get("top_symbols"), list):
            continue
        for sym in perf["top_symbols"]:
            rows.append(
                [
                    str(row["index"]),
                    str(sym.get("symbol", NOT_RECORDED)),
                    fmt(sym.get("dso")),
                    _pct(sym.get("inclusive_pct")),
                    _pct(sym.get("self_pct")),
                ]
            )
    if not rows:
        return None
    return Table(["invocation", "symbol", "object", "inclusive %", "self %"], rows)


def _pct(value: Any) -> str:
    return NOT_RECORDED if not isinstance(value, int | float) else f"{value:.1f}"


def flows_table(scenario: ScenarioResult) -> Table | None:
    rows: list[list[str]] = []
    columns: list[str] = []
    for row in scenario.merged_invocations():
        packets = row["observed"].get("packets")
        flows = packets.get("flows") if packets else None
        if not isinstance(flows, list):
            continue
        for flow in flows:
            if isinstance(flow, Mapping):
                columns += [k for k in flow if k not in columns]
    if not columns:
        return None
    for row in scenario.merged_invocations():
        packets = row["observed"].get("packets")
        flows = packets.get("flows") if packets else None
        for flow in flows if isinstance(flows, list) else []:
            if isinstance(flow, Mapping):
                rows.append([str(row["index"]), *(fmt(flow.get(c)) for c in columns)])
    return Table(["invocation", *columns], rows)


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


def findings_table(scenario: ScenarioResult) -> Table:
    rows = []
    for f in scenario.findings:
        rows.append(
            [
                f.observer,
                "all" if f.invocation is None else str(f.invocation),
                f.key,
                fmt(f.expected),
                NOT_OBSERVED if f.met is None and f.observed is None else fmt(f.observed),
                finding_word(f.met),
                f.reason or "",
            ]
        )
    notes = [] if rows else ["This scenario declares no calibration findings."]
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


# --------------------------------------------------------------------------- repetitions


def _clause_counts(counts: Mapping[str, Any] | None, n: int) -> str:
    if not counts:
        return NOT_RECORDED
    parts = [
        f"{int(counts.get(outcome, 0))}/{n} {outcome}"
        for outcome in ("pass", "fail", "not-observed", "not-exercised")
        if int(counts.get(outcome, 0))
    ]
    as_expected = counts.get("as_expected")
    if isinstance(as_expected, int) and counts.get("expected") and as_expected != n:
        parts.append(f"({as_expected}/{n} as expected: {counts['expected']})")
    return "\n".join(parts) if parts else f"none of {n}"


def _spread(stats: Any) -> str:
    if not isinstance(stats, Mapping) or stats.get("median") is None:
        return NOT_RECORDED
    if stats.get("min") == stats.get("max"):
        return fmt_seconds(stats.get("median"))
    return (
        f"{fmt_seconds(stats.get('median'))} "
        f"({fmt_seconds(stats.get('min'))} - {fmt_seconds(stats.get('max'))})"
    )


def aggregate_table(run: RunResult) -> Table:
    """One row per scenario from ``run.aggregate`` (``lab.judge.aggregate``): k/N per clause and
    the aggregate's own capability/reliability wording."""
    rows = []
    for agg in run.aggregate:
        n = int(agg.get("repetitions", 0))
        cal = agg.get("calibration") or {}
        # repetitions with no observation disagreeing with its expectation
        k = int(cal.get("no_disagreement_repetitions", cal.get("met_repetitions", 0)))
        total = int(cal.get("total", n))
        words = agg.get("wording") or repetition_wording(k, total)
        failed = agg.get("failed_repetitions") or []
        clauses = agg.get("clauses") or {}
        rows.append(
            [
                str(agg.get("scenario", NOT_RECORDED)),
                str(n),
                *(_clause_counts(clauses.get(c), n) for c in CLAUSES),
                (words if agg.get("wording") else f"{k}/{total} as expected: {words}")
                + (f"; failed repetition(s): {fmt(failed)}" if failed else ""),
                _spread(agg.get("wall_s")),
                _spread(agg.get("cpu_s")),
            ]
        )
    notes = [
        "Each repetition starts from a fresh state and failed repetitions keep all their "
        "evidence. One run shows capability, never reliability; reliability is stated from "
        "3 repetitions on.",
        "Timing: median (min - max) of the client's untraced wall and CPU time per repetition.",
    ]
    return Table(
        [
            "scenario",
            "N",
            *CLAUSES,
            "calibration over repetitions",
            "wall median (range)",
            "CPU median (range)",
        ],
        rows,
        notes,
    )


def repetition_table(run: RunResult, name: str) -> Table:
    rows = []
    for s in run.scenarios:
        if s.name != name:
            continue
        cal = s.calibration
        untraced = s.primary
        wall = sum(i.claim.wall_s for i in untraced.invocations) if untraced else None
        rows.append(
            [
                str(s.repetition),
                *(s.verdicts[c].observed if c in s.verdicts else NOT_RECORDED for c in CLAUSES),
                f"{cal.met}/{cal.total} met, {cal.not_met} not met, "
                f"{cal.not_observed} not observed",
                fmt_seconds(wall),
                s.error or "-",
            ]
        )
    return Table(
        ["repetition", *CLAUSES, "calibration", "client wall (all invocations)", "error"], rows
    )


def has_repetitions(run: RunResult) -> bool:
    """True when any scenario ran more than once (then the aggregate table means something)."""
    return bool(repeated_names(run)) or any(
        int(agg.get("repetitions", 1)) > 1 for agg in run.aggregate
    )


SINGLE_RUN_STATEMENT = (
    "Each scenario ran once: every result in this report shows capability (what happened "
    "in one run), never reliability. Use --repetitions N (N >= 3) for a reliability claim."
)


def repeated_names(run: RunResult) -> list[str]:
    names: list[str] = []
    for s in run.scenarios:
        if s.name not in names and sum(1 for t in run.scenarios if t.name == s.name) > 1:
            names.append(s.name)
    return names


# --------------------------------------------------------------------------- evaluation

#: Keys of ``run.evaluation`` (``lab.evaluate.judge``) this report draws in dedicated tables;
#: anything else is listed under "other recorded fields" so nothing recorded is hidden.
EVALUATION_KEYS = frozenset(
    {
        "evaluation_id",
        "status",
        "status_reason",
        "candidate",
        "instrument_check",
        "client_contract",
        "timing",
        "diagnostics",
        "clauses",
        "repetitions",
        "files",
        "lab_version",
        "fixture",
        "limits",
    }
)
#: untraced timing metrics of ``lab.evaluate.timing.alternate``, in report order
TIMING_METRICS: tuple[tuple[str, str], ...] = (
    ("first_backup_wall", "first backup, wall"),
    ("first_backup_cpu", "first backup, CPU"),
    ("unchanged_wall", "unchanged second run, wall"),
    ("unchanged_cpu", "unchanged second run, CPU"),
)


def evaluation_refusal(evaluation: Mapping[str, Any]) -> str | None:
    """The sentence to put in front of everything when the lab refused to judge."""
    if evaluation.get("status") != "refused":
        return None
    why = evaluation.get("status_reason") or "no reason recorded"
    return f"The lab refused to judge this candidate: {why}."


def evaluation_identity(evaluation: Mapping[str, Any]) -> list[tuple[str, str]]:
    status = fmt(evaluation.get("status"))
    if evaluation.get("status_reason"):
        status += f" ({evaluation['status_reason']})"
    rows = [
        ("evaluation id", fmt(evaluation.get("evaluation_id"))),
        ("status", status),
        ("lab version", fmt(evaluation.get("lab_version"))),
        ("repetitions", fmt(evaluation.get("repetitions"))),
    ]
    candidate = evaluation.get("candidate")
    if isinstance(candidate, Mapping):
        rows.append(("candidate kind", fmt(candidate.get("kind"))))
        rows.append(("candidate input", fmt(candidate.get("input_name"))))
        rows.append(("candidate input SHA-256", fmt(candidate.get("input_sha256"))))
        rows.append(("candidate binary SHA-256", fmt(candidate.get("binary_sha256"))))
        build = candidate.get("build")
        if isinstance(build, Mapping):
            rows.append(("build status", fmt(build.get("status"))))
            for key in sorted(build):
                if key != "status":
                    rows.append((f"build {key.replace('_', ' ')}", fmt(build[key])))
        else:
            rows.append(("build status", fmt(build)))
        for key in sorted(candidate):
            if key not in ("kind", "input_name", "input_sha256", "binary_sha256", "build"):
                rows.append((f"candidate {key.replace('_', ' ')}", fmt(candidate[key])))
    else:
        rows.append(("candidate", NOT_RECORDED))
    check = evaluation.get("instrument_check")
    if isinstance(check, Mapping):
        caught = check.get("caught")
        detail = (
            "; ".join(
                f"{name}: " + ", ".join(f"{c} {caught[name][c]}" for c in sorted(caught[name]))
                for name in sorted(caught)
                if isinstance(caught[name], Mapping)
            )
            if isinstance(caught, Mapping)
            else fmt(caught)
        )
        ok = check.get("ok")
        verdict = "caught the seeded defects" if ok else "did NOT catch the seeded defects"
        rows.append(("instrument check", f"{verdict} ({detail or NOT_RECORDED})"))
    contract = evaluation.get("client_contract")
    if isinstance(contract, Mapping):
        if contract.get("honoured"):
            rows.append(("client contract v1", "honoured in every invocation"))
        else:
            shown = contract.get("violations") or []
            first = "; ".join(
                f"{v.get('condition')} r{v.get('repetition')} {v.get('pass')} "
                f"inv {v.get('invocation')}: {v.get('problem')}"
                for v in shown[:3]
                if isinstance(v, Mapping)
            )
            rows.append(
                (
                    "client contract v1",
                    f"NOT honoured: {fmt(contract.get('violation_count'))} violation(s); {first}",
                )
            )
    for key in ("fixture", "limits"):
        value = evaluation.get(key)
        if isinstance(value, Mapping):
            rows.append((key, "; ".join(f"{k}: {fmt(value[k])}" for k in sorted(value))))
    return rows


def evaluation_frozen_files(evaluation: Mapping[str, Any]) -> Table | None:
    files = evaluation.get("files")
    if not isinstance(files, Mapping) or not files:
        return None
    rows = [[name, str(files[name])] for name in sorted(files)]
    notes = ["Hashed before the candidate ran; together they define the evaluation id."]
    return Table(["frozen file", "SHA-256"], rows, notes)


def timing_ratio(candidate: Any, baseline: Any) -> float | None:
    """candidate ÷ baseline median; None where either median is missing or zero."""
    if not isinstance(candidate, Mapping) or not isinstance(baseline, Mapping):
        return None
    c, b = candidate.get("median"), baseline.get("median")
    if not isinstance(c, int | float) or not isinstance(b, int | float) or b <= 0:
        return None
    return float(c) / float(b)


def evaluation_timing_table(evaluation: Mapping[str, Any]) -> Table | None:
    timing = evaluation.get("timing")
    if not isinstance(timing, Mapping):
        return None
    clients = timing.get("clients") or {}
    base = clients.get("baseline") or {}
    cand = clients.get("candidate") or {}
    recorded = timing.get("ratio")
    ratios: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    rows = []
    for metric, label in TIMING_METRICS:
        ratio = (
            ratios.get(metric)
            if metric in ratios
            else timing_ratio(cand.get(metric), base.get(metric))
        )
        rows.append(
            [
                label,
                _spread(base.get(metric)),
                _spread(cand.get(metric)),
                fmt_ratio(ratio if isinstance(ratio, int | float) else None),
            ]
        )
    exits = [
        f"{name}: {fmt(clients[name].get('nonzero_exits'))}"
        for name in ("baseline", "candidate")
        if isinstance(clients.get(name), Mapping)
    ]
    notes = [
        f"Untraced runs, {fmt(timing.get('rounds'))} rounds, clients alternated. "
        "Ratio = candidate median / baseline median; below 1.00x the candidate is faster; "
        "N/A where undefined.",
        f"Method: {fmt(timing.get('method'))}.",
    ]
    if exits:
        notes.append("Runs that exited non-zero: " + "; ".join(exits) + ".")
    return Table(
        ["untraced timing", "baseline median (range)", "candidate median (range)", "ratio"],
        rows,
        notes,
    )


def evaluation_clause_table(evaluation: Mapping[str, Any]) -> Table | None:
    clauses = evaluation.get("clauses")
    if not isinstance(clauses, Mapping):
        return None
    rows = []
    for c in CLAUSES:
        counts = clauses.get(c)
        if not isinstance(counts, Mapping):
            rows.append([c, CLAUSE_TITLES[c], NOT_RECORDED, NOT_RECORDED])
            continue
        n = int(counts.get("total", evaluation.get("repetitions", 0)) or 0)
        k = int(counts.get("pass", 0))
        rows.append([c, CLAUSE_TITLES[c], _clause_counts(counts, n), repetition_wording(k, n)])
    return Table(["clause", "requirement", "outcomes", "claim supported"], rows)


DIAGNOSTIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("condition", "condition"),
    ("repetition", "rep."),
    ("invocation", "inv."),
    ("source_bytes_read", "source bytes read"),
    ("read_ratio", "read / file size"),
    ("hash_file_calls", "hash_file entries"),
    ("cpu_s_untraced", "untraced CPU"),
)


def evaluation_diagnostics_table(evaluation: Mapping[str, Any]) -> Table | None:
    """Unnecessary-work diagnostics (traced passes): no threshold, kept apart from timing."""
    diagnostics = evaluation.get("diagnostics")
    if not isinstance(diagnostics, list) or not diagnostics:
        return None
    rows = []
    for row in diagnostics:
        if not isinstance(row, Mapping):
            continue
        cells = []
        for key, _ in DIAGNOSTIC_COLUMNS:
            value = row.get(key)
            if key == "cpu_s_untraced":
                cells.append(fmt_seconds(value) if isinstance(value, int | float) else NOT_RECORDED)
            elif value is None:
                cells.append(NOT_OBSERVED)
            else:
                cells.append(fmt(value))
        missing = row.get("missing") or []
        cells.append(fmt(missing) if missing else "-")
        rows.append(cells)
    notes = [
        "From traced passes: diagnostics of unnecessary work, with no threshold; they are "
        "not timings. 'not observed' means the collector named in the last column did not run."
    ]
    header = [label for _, label in DIAGNOSTIC_COLUMNS] + ["collectors missing"]
    return Table(header, rows, notes)


def evaluation_other_rows(evaluation: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(k, fmt(evaluation[k])) for k in sorted(evaluation) if k not in EVALUATION_KEYS]


# --------------------------------------------------------------------------- archive


def files_table(files: list[ArchivedFile] | None) -> Table:
    notes = [
        "SHA256SUMS covers every archived file, this report included; SHA256SUMS.sig signs "
        "SHA256SUMS. Files written after this report (SHA256SUMS, its signature, the "
        "attestation) are not in this table."
    ]
    if files is None:
        return Table(
            ["path", "size (bytes)", "SHA-256"],
            [],
            ["The archived file list was not supplied to this report.", *notes],
        )
    rows = [
        [f.path, fmt(f.size), f.sha256]
        for f in sorted(files, key=lambda f: f.path)
        if f.path not in REPORT_FILES
    ]
    views = {"report.md": "Markdown", "report.pdf": "PDF"}
    rows += [
        [name, "-", f"this report ({views.get(name, name)} view): digest in SHA256SUMS"]
        for name in REPORT_FILES
    ]
    return Table(["path", "size (bytes)", "SHA-256"], rows, notes)


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
            "(the tracer's start-up and its own CPU included)."
        ],
    )
