"""The contract: clauses C1–C6 judged from independent evidence only.

No verdict is inferred from the client's own output, except C6, which compares that output
with the evidence. Each pass of a scenario is judged on its own records; the verdicts of the
passes are then merged (a failure anywhere is a failure; a pass needs some pass whose
evidence establishes the clause; otherwise ``not-observed``, with the reason).

    verdicts = judge(scenario_result, expected=scenario.expect.verdicts)
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.model import (
    CLAUSES,
    BpftraceSummary,
    Invocation,
    Outcome,
    PacketSummary,
    Pass,
    ScenarioResult,
    StraceSummary,
    Verdict,
)
from lab.workloads.backup.protocol import MAX_LINE

#: the client contract's retry bound (docs/client-contract.md)
MAX_UPLOAD_ATTEMPTS = 3
#: observers that see every network destination of the client, by any syscall
DESTINATION_OBSERVERS = ("strace", "bpftrace")


@dataclass
class PassVerdict:
    outcome: Outcome
    evidence: list[str]
    reason: str


def _ok(evidence: list[str], reason: str) -> PassVerdict:
    return PassVerdict("pass", evidence, reason)


def _fail(evidence: list[str], reason: str) -> PassVerdict:
    return PassVerdict("fail", evidence, reason)


def _unseen(evidence: list[str], reason: str) -> PassVerdict:
    return PassVerdict("not-observed", evidence, reason)


def _unexercised(evidence: list[str], reason: str) -> PassVerdict:
    return PassVerdict("not-exercised", evidence, reason)


def c1_content(p: Pass) -> PassVerdict:
    """The backup on disk equals the fixture (digest taken before the client ran), the
    receiver's own commit record says it committed exactly that, and the source the client
    was given is unchanged."""
    last = p.invocations[-1]
    v = last.verifier
    evidence = ["verifier", "receiver"]
    if not v.source_unchanged:
        return _fail(
            evidence,
            f"after invocation {last.index} the source on disk no longer has the fixture's "
            f"digest {v.source_sha256[:12]}…: the source was changed",
        )
    if v.backup_exists and not v.store_consistent:
        committed = (v.receiver_digest or "nothing")[:12]
        return _fail(
            evidence,
            f"after invocation {last.index} the saved file ({(v.backup_sha256 or '')[:12]}…) is "
            f"not what the receiver committed ({committed}): store written outside the protocol",
        )
    if not v.backup_exists:
        return _fail(evidence, f"after invocation {last.index} no backup was saved")
    if not v.matches_source:
        return _fail(
            evidence,
            f"after invocation {last.index} the saved backup's SHA-256 "
            f"{(v.backup_sha256 or '')[:12]}… differs from the source's {v.source_sha256[:12]}…",
        )
    return _ok(
        evidence,
        f"after invocation {last.index} the saved backup matches the source's fixture digest, "
        "and it is what the receiver committed",
    )


def c2_no_redundant_upload(p: Pass) -> PassVerdict:
    judged: list[str] = []
    evidence = ["receiver"]
    for inv in p.invocations:
        r = inv.receiver
        if inv.index == 1 or not r.held_source_at_start:
            continue
        if r.upload_attempts or r.payload_bytes_consumed:
            return _fail(
                evidence,
                f"invocation {inv.index} began with the source's content already saved, yet the "
                f"client sent {r.upload_attempts} PUT request(s) and the receiver consumed "
                f"{r.payload_bytes_consumed} payload bytes",
            )
        packets = inv.observed.packets
        if packets is not None:
            evidence = ["receiver", "packets"]
            sent = packets.payload_bytes_to_receiver
            bound = MAX_LINE * max(r.connections, 1)
            if sent > bound:
                return _fail(
                    evidence,
                    f"invocation {inv.index}: the capture shows {sent} bytes sent to the receiver, "
                    f"more than {r.connections} request line(s) can hold",
                )
        judged.append(str(inv.index))
    if not judged:
        return _unexercised(
            evidence,
            "no later invocation began with the source's content already saved, so no upload "
            "could have been redundant",
        )
    return _ok(
        evidence,
        f"invocation(s) {', '.join(judged)} began with the content saved and sent no upload "
        "payload",
    )


def _destination_summary(
    inv: Invocation, observer: str
) -> StraceSummary | BpftraceSummary | PacketSummary | None:
    """The summary of an observer that sees destinations (strace, bpftrace, packets)."""
    seen = inv.observed
    return {"strace": seen.strace, "bpftrace": seen.bpftrace, "packets": seen.packets}[observer]


def _destinations(inv: Invocation, observer: str) -> list[str] | None:
    summary = _destination_summary(inv, observer)
    return None if summary is None else list(summary.destinations)


def _blind_spots(inv: Invocation, observer: str) -> list[str]:
    """Why ``observer`` cannot vouch that it saw every destination of this invocation."""
    strace, bpf = inv.observed.strace, inv.observed.bpftrace
    if observer == "strace":
        return [] if strace is None else list(strace.undecodable)
    if bpf is None:
        return []
    spots = list(bpf.undecodable)
    if not bpf.events_complete:
        spots.append(f"bpftrace lost {bpf.lost_events} event line(s)")
    return spots


def c3_destination(p: Pass) -> PassVerdict:
    allowed = {p.receiver_address}
    evidence: list[str] = ["decoy"]
    for inv in p.invocations:
        if inv.decoy.connections:
            peers = ", ".join(inv.decoy.peers)
            return _fail(
                evidence,
                f"invocation {inv.index}: the decoy at {p.decoy_address} recorded "
                f"{inv.decoy.connections} connection(s) from {peers}",
            )
    complete = None
    blind: list[str] = []
    for observer in (*DESTINATION_OBSERVERS, "packets"):
        seen = [_destinations(inv, observer) for inv in p.invocations]
        if any(s is None for s in seen):
            continue
        evidence.append(observer)
        for inv, dests in zip(p.invocations, seen, strict=True):
            assert dests is not None
            extra = sorted(set(dests) - allowed)
            if extra:
                return _fail(
                    evidence,
                    f"invocation {inv.index}: {observer} saw the client contact "
                    f"{', '.join(extra)} besides the receiver {p.receiver_address}",
                )
        if observer in DESTINATION_OBSERVERS:
            spots = [
                f"{s} (invocation {i.index})"
                for i in p.invocations
                for s in _blind_spots(i, observer)
            ]
            if spots:
                blind += [f"{observer}: {s}" for s in spots]
            elif complete is None:
                complete = observer
    outlived = [
        f"invocation {inv.index}: {inv.sandbox.lingering_count} process(es) "
        f"({', '.join(sorted({q.comm for q in inv.sandbox.lingering}))}) outlived the client "
        f"and {inv.sandbox.lingering_killed} were killed before they finished"
        for inv in p.invocations
        if inv.sandbox.lingering_killed
    ]
    if outlived:
        return _unseen(
            evidence,
            "; ".join(outlived) + ": what they would have contacted was not observed",
        )
    if complete is None:
        if blind:
            return _unseen(
                evidence,
                "the client used a channel the syscall observers cannot decode ("
                + "; ".join(blind)
                + "); nothing seen contacted another destination, which cannot rule one out",
            )
        return _unseen(
            evidence,
            "no syscall observer (strace or bpftrace) ran in this pass; the decoy saw no "
            "connection, which cannot rule out other destinations",
        )
    return _ok(
        evidence,
        f"{complete} saw every network destination of the client and of every process it "
        f"started, in every invocation; only the receiver {p.receiver_address} was contacted",
    )


def c4_recovery(p: Pass, faults_configured: bool) -> PassVerdict:
    evidence = ["receiver"]
    for inv in p.invocations:
        if inv.receiver.upload_attempts > MAX_UPLOAD_ATTEMPTS:
            return _fail(
                evidence,
                f"invocation {inv.index} made {inv.receiver.upload_attempts} upload attempts, "
                f"more than {MAX_UPLOAD_ATTEMPTS}",
            )
    dropped = [inv for inv in p.invocations if inv.receiver.dropped_transfers]
    if not faults_configured:
        return _unexercised(
            evidence,
            "no interruption was injected in this scenario; still checked: no invocation "
            f"exceeded {MAX_UPLOAD_ATTEMPTS} upload attempts",
        )
    if not dropped:
        return _unexercised(
            evidence,
            "an interruption was configured but never triggered: the client made no upload "
            "that the receiver could drop",
        )
    for inv in dropped:
        r = inv.receiver
        decisions = r.decisions
        first_drop = decisions.index("dropped-by-fault")
        if "committed" not in decisions[first_drop + 1 :]:
            return _fail(
                evidence,
                f"invocation {inv.index}: after the injected drop the backup was not committed "
                f"within {r.upload_attempts} upload attempt(s)",
            )
    inv = dropped[0]
    return _ok(
        evidence,
        f"invocation {inv.index}: the receiver dropped an upload (injected fault) and committed "
        f"the backup on upload attempt {inv.receiver.decisions.index('committed') + 1} "
        f"(at most {MAX_UPLOAD_ATTEMPTS} allowed)",
    )


def c5_integrity(p: Pass) -> PassVerdict:
    evidence = ["receiver", "verifier"]
    before = p.preload_sha256
    mismatches = 0
    for inv in p.invocations:
        r = inv.receiver
        after = inv.verifier.backup_sha256
        mismatches += r.decisions.count("digest-mismatch")
        committed = "committed" in r.decisions
        if (not committed and after != before) or not inv.verifier.store_consistent:
            return _fail(
                evidence,
                f"invocation {inv.index}: the saved backup changed ({(before or 'none')[:12]} → "
                f"{(after or 'none')[:12]}) without a validated commit",
            )
        before = after
    if mismatches == 0:
        return _unexercised(
            evidence,
            "no mismatched payload was offered; still checked: the saved backup changed only "
            "by validated commits",
        )
    return _ok(
        evidence,
        f"the receiver rejected {mismatches} upload(s) whose payload did not match the advertised "
        "digest, before commit; the saved backup was left untouched",
    )


def c6_truthful_claim(p: Pass) -> PassVerdict:
    evidence = ["client-output", "verifier"]
    for inv in p.invocations:
        c = inv.claim
        if c.exit_status is None and not c.timed_out:
            return _unseen(
                evidence,
                f"invocation {inv.index}: the client's exit status was not observable in this pass",
            )
        outcome = inv.verifier.verified
        if c.timed_out:
            return _fail(evidence, f"invocation {inv.index}: the client did not finish in time")
        status_ok = c.exit_status == 0
        event_ok = c.completion is not None and c.completion.get("status") == "ok"
        if status_ok != event_ok:
            return _fail(
                evidence,
                f"invocation {inv.index}: exit status {c.exit_status} and completion event "
                f"{c.completion!r} disagree",
            )
        if status_ok != outcome:
            said = "success" if status_ok else "failure"
            was = "a verified backup" if outcome else "no verified backup"
            return _fail(
                evidence,
                f"invocation {inv.index}: the client claimed {said} (exit {c.exit_status}) but "
                f"the backup check found {was}",
            )
    return _ok(
        evidence,
        "in every invocation the client's exit status and completion event agree with the "
        "backup check",
    )


#: clauses whose evidence an uncontained client can reach (the store, the source, any
#: network): with --sandbox off they may fail but never pass
FORGEABLE_WITHOUT_SANDBOX = ("C1", "C3", "C5", "C6")


def judge_pass(p: Pass, *, faults_configured: bool) -> dict[str, PassVerdict]:
    verdicts = {
        "C1": c1_content(p),
        "C2": c2_no_redundant_upload(p),
        "C3": c3_destination(p),
        "C4": c4_recovery(p, faults_configured),
        "C5": c5_integrity(p),
        "C6": c6_truthful_claim(p),
    }
    if not p.sandboxed:
        for clause in FORGEABLE_WITHOUT_SANDBOX:
            v = verdicts[clause]
            if v.outcome == "pass":
                verdicts[clause] = _unseen(
                    v.evidence,
                    f"the client ran outside the sandbox (--sandbox off), so it could have "
                    f"forged this evidence; unconfirmed: {v.reason}",
                )
    return verdicts


def merge(per_pass: list[tuple[str, PassVerdict]], expected: Outcome | None) -> Verdict:
    """A failure in any pass fails the clause; otherwise a pass in any pass passes it;
    otherwise it is not exercised if any pass says so, else not observed."""
    evidence: list[str] = []
    for _, v in per_pass:
        for e in v.evidence:
            if e not in evidence:
                evidence.append(e)
    for wanted in ("fail", "pass", "not-exercised"):
        hits = [(name, v) for name, v in per_pass if v.outcome == wanted]
        if hits:
            names = ", ".join(name for name, _ in hits)
            v = hits[0][1]
            return Verdict(
                expected=expected,
                observed=v.outcome,
                evidence=evidence,
                reason=f"{v.reason} (pass: {names})",
            )
    reasons = "; ".join(f"{name}: {v.reason}" for name, v in per_pass) or "no pass ran"
    return Verdict(expected=expected, observed="not-observed", evidence=evidence, reason=reasons)


def judge(
    result: ScenarioResult, *, expected: dict[str, str], faults_configured: bool
) -> dict[str, Verdict]:
    per_clause: dict[str, list[tuple[str, PassVerdict]]] = {c: [] for c in CLAUSES}
    for p in result.passes:
        if not p.invocations or p.error is not None:
            continue  # a pass whose tracer failed is evidence of nothing about the client
        for clause, v in judge_pass(p, faults_configured=faults_configured).items():
            per_clause[clause].append((p.collector, v))
    out: dict[str, Verdict] = {}
    for clause in CLAUSES:
        want = expected.get(clause)
        out[clause] = merge(per_clause[clause], want)  # type: ignore[arg-type]
    return out
