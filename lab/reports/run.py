"""Rows and sentences about the run as a whole: the exit-status statement, the calibration
sentence, the run's identity, the observers and what each cannot see, the verdict matrix.

    calibration_statement(run.calibration)   # "41 of 44 expectations met, ..."
    identity_rows(run)                       # [("run id", "..."), ("git commit", ...), ...]
    observer_table(run)                      # Table: observer | status | reason | limits
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.model import (
    CLAUSE_TITLES,
    OBSERVERS,
    PROCESS_COLLECTORS,
    Calibration,
    RunResult,
    ScenarioResult,
    Verdict,
)
from lab.model.records import ConcurrencyRecord
from lab.reports.table import NOT_RECORDED, Table, fmt, fmt_field, phrase

#: The article's warning, kept as the report's own sentence: the runner's exit status speaks
#: about the instrument, not about the backups.
EXIT_STATUS_STATEMENT = (
    "The runner's exit status is not a statement that every backup was correct. "
    "Exit status 0 means that every scenario executed and the instrument's observations "
    "matched the scenario expectations, including the scenarios that are expected to fail "
    "clauses. Read each scenario's independent verification result below."
)


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
    "The timeline puts every source on one clock (CLOCK_MONOTONIC, named in its first row, "
    "with the realtime offset used and its uncertainty): client lines as the lab read them "
    "(only as early as the client flushed them), runner, receiver, decoy and verifier events, "
    "and the kernel's and the wire's own events from strace and the capture (microseconds), "
    "bpftrace (nanoseconds) and perf's sample window. A merged run's timeline is on "
    "CLOCK_REALTIME, each shard's rows converted with that shard's own measured offset; the "
    "offset between the shards' machines' clocks is not measured, so rows of different "
    "shards are ordered only as well as those clocks agree.",
    "The seeded behaviors check the instrument. They do not measure how often an agent "
    "introduces such defects.",
    "The fixture omits TLS, compression, multi-file snapshots and source changes during transfer.",
)


#: Environment keys never shown in a report (identifying the host is not evidence).
HIDDEN_ENVIRONMENT_KEYS = frozenset({"hostname", "host", "user", "username", "home", "cwd"})


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


def run_name(run_id: str) -> str:
    """ "run <id>", without saying "run" twice for the lab's own "run-…" ids."""
    return run_id if run_id.startswith("run-") else f"run {run_id}"


def clause_name(clause: str) -> str:
    """A clause's short name ("content" for C1), the words before its requirement."""
    return CLAUSE_TITLES[clause].split(":", 1)[0]


def scenario_label(scenario: ScenarioResult, run: RunResult) -> str:
    """The scenario's name, with its repetition when the name occurs more than once."""
    same = sum(1 for s in run.scenarios if s.name == scenario.name)
    return scenario.name if same <= 1 else f"{scenario.name} #{scenario.repetition}"


def identity_rows(run: RunResult) -> list[tuple[str, str]]:
    """Who and what produced the run, one readable row per fact: a nested record (the
    container image, tool versions) becomes one row per field, never a JSON dump."""
    env = run.environment
    rows: list[tuple[str, str]] = [
        ("run id", run.run_id),
        ("started", run.started_at),
        ("finished", run.finished_at),
        ("git commit", fmt(env.get("git_commit"))),
    ]
    image = env.get("image")
    if image is None and "image" in env:
        rows.append(("container image", "not run in a container"))
    else:
        rows += _value_rows("container image", image)
    rows += [
        ("client binary SHA-256", fmt(env.get("client_sha256"))),
        ("kernel", fmt(env.get("kernel"))),
        ("CPU model", fmt(env.get("cpu_model"))),
    ]
    tools = env.get("tool_versions")
    if isinstance(tools, Mapping) and tools:
        rows += [(f"tool version: {k}", fmt(tools[k])) for k in sorted(tools)]
    else:
        rows.append(("tool versions", NOT_RECORDED))
    known = {"git_commit", "image", "client_sha256", "kernel", "cpu_model", "tool_versions"}
    for key in sorted(env):
        if key in known or key.lower() in HIDDEN_ENVIRONMENT_KEYS:
            continue
        rows += _value_rows(key.replace("_", " "), env[key])
    rows.append(("collectors used", collectors_used(run)))
    rows.append(("collectors unavailable", collectors_unavailable(run)))
    rows.append(("passes at once", concurrency_statement(run)))
    sessions = sessions_statement(run)
    if sessions is not None:
        rows.append(("bpftrace sessions", sessions))
    for key in sorted(run.options):
        rows += _value_rows(f"option {key}", run.options[key])
    rows.append(("signing key id", signing_key_text(run.signing)))
    if "ephemeral" in run.signing:
        rows.append(("ephemeral signing key", fmt(bool(run.signing.get("ephemeral")))))
    return rows


def mapping_rows(
    label: str, value: Mapping[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """A record as rows "label: key" -> value, a nested record flattened ("container image:
    base digest"), so that a reader never meets braces and quotes."""
    rows: list[tuple[str, str]] = []
    for key in sorted(value, key=str):
        item = value[key]
        here = (*path, str(key).replace("_", " "))
        if isinstance(item, Mapping) and item:
            rows += mapping_rows(label, item, here)
        else:
            rows.append((f"{label}: {' '.join(here)}", fmt_field(str(key), item)))
    return rows


def _value_rows(label: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, Mapping) and value:
        return mapping_rows(label, value)
    return [(label, fmt_field(label, value))]


def signing_key_text(signing: Mapping[str, Any]) -> str:
    """The key id, said the way the tools a reviewer runs say it."""
    # The key id is what minisign -V and lab verify print; no tool prints a SHA-256 of the key.
    key_id = signing.get("key_id")
    if not key_id:
        return fmt(None)
    return f"{key_id} (as minisign -V and lab verify print it; lab.pub, lab.pub.pem)"


def signing_key_statement(signing: Mapping[str, Any]) -> str:
    """Page 1's sentence about the key: its id, and what the signature does and does not show."""
    key_id = signing.get("key_id")
    if not key_id:
        return "Signing key id: not recorded."
    return (
        f"Signing key id {key_id}: what minisign -V and lab verify print; the public key is "
        "lab.pub (lab.pub.pem for openssl) in the archive."
    )


def collectors_used(run: RunResult) -> str:
    """The passes that ran, and whether packet capture ran beside them."""
    ran = {p.collector for s in run.scenarios for p in s.passes}
    order = ("none", *PROCESS_COLLECTORS)
    collectors = [c for c in order if c in ran] + sorted(ran - set(order))
    if not collectors:
        return "none (no pass ran)"
    words = [("none (untraced)" if c == "none" else c) for c in collectors]
    captured = any(
        inv.observed.packets is not None
        for s in run.scenarios
        for p in s.passes
        for inv in p.invocations
    )
    text = ", ".join(words)
    return text + ("; packet capture beside the passes" if captured else "; no packet capture")


def concurrency_statement(run: RunResult) -> str:
    """Which passes ran beside another one (``--jobs N``, lab.run.schedule), and so had their
    wall and CPU times measured while another pass shared the cores."""
    record: ConcurrencyRecord | dict[str, Any] = run.concurrency or {}
    overlapped = [(s, p) for s in run.scenarios for p in s.passes if p.concurrent]
    if not overlapped:
        why = record.get("why_sequential")
        return f"one pass at a time ({why})" if why else "one pass at a time"
    jobs = record.get("jobs")
    at_once = f"up to {jobs} at a time (--jobs {jobs})" if jobs else "several at a time"
    return (
        f"{fmt(len(overlapped))} passes ran beside another pass, {at_once}: "
        f"{_which_overlapped(run, overlapped)}; their wall and CPU times were measured while "
        f"another pass shared the cores. {_overlap_rule(record)}"
    )


def _which_overlapped(run: RunResult, overlapped: list[tuple[Any, Any]]) -> str:
    """The passes that overlapped, named one by one when few, else counted per collector."""
    if len(overlapped) <= 6:
        return ", ".join(f"{scenario_label(s, run)} ({p.collector})" for s, p in overlapped)
    parts = []
    for collector in ("none", *PROCESS_COLLECTORS):
        total = sum(1 for s in run.scenarios for p in s.passes if p.collector == collector)
        if not total:
            continue
        beside = sum(1 for _, p in overlapped if p.collector == collector)
        label = "untraced" if collector == "none" else collector
        share = f"all {fmt(beside)}" if beside == total else f"{fmt(beside)} of {fmt(total)}"
        parts.append(f"{share} {label} passes")
    return ", ".join(parts)


def _overlap_rule(record: ConcurrencyRecord | dict[str, Any]) -> str:
    """What may overlap, as the run's own record says (a run made before traced passes
    could overlap says so)."""
    if set(record.get("overlapping") or []) - {"none"}:
        return (
            "A run goes phase by phase (every untraced pass, then every strace pass, ...); "
            "passes of one phase may run side by side, and timing rounds always run alone"
        )
    return "Traced passes, passes with a packet capture and timing rounds always run alone"


def sessions_statement(run: RunResult) -> str | None:
    """How bpftrace attached: once for every bpftrace pass (``lab.run.phases``), or once per
    pass; None when no bpftrace pass ran."""
    ran = [
        p for s in run.scenarios for p in s.passes if p.collector == "bpftrace" and not p.skipped
    ]
    if not ran:
        return None
    shared = {p.session.directory: p.session for p in ran if p.session is not None}
    parts = []
    for record in shared.values():
        if record.attach_s is None:
            timing = " (it could not start; each of those passes says why)"
        else:
            stop = f" and stopped in {record.stop_s:.1f} s" if record.stop_s is not None else ""
            timing = f", attached in {record.attach_s:.1f} s{stop}"
        parts.append(
            f"one bpftrace session for {fmt(record.passes)} passes "
            f"({fmt(record.invocations)} invocations){timing}; its whole output is "
            f"{record.directory}/bpftrace.txt, split per invocation by cgroup id"
        )
    own = sum(1 for p in ran if p.session is None)
    if own:
        parts.append(f"{fmt(own)} bpftrace pass(es) with a session of their own")
    return "; ".join(parts)


def collectors_unavailable(run: RunResult) -> str:
    missing = [
        f"{name}: {phrase(status.reason or 'no reason recorded')}"
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
        why = phrase(status.reason or "")
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
