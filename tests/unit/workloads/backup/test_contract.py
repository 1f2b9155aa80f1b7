"""Judging clauses C1–C6 from records built by hand (no processes)."""

from __future__ import annotations

from typing import Any

from lab.model import (
    BpftraceSummary,
    ClientClaim,
    DecoySummary,
    Invocation,
    Lingering,
    Observed,
    PacketSummary,
    Pass,
    ReceiverSummary,
    SandboxRecord,
    ScenarioResult,
    StraceSummary,
    VerifierCheck,
)
from lab.workloads.backup import contract

SRC = "s" * 64
RX = "127.0.0.1:4000"
DECOY = "127.0.0.1:5000"


def inv(
    index: int,
    *,
    exit_status: int | None = 0,
    status: str = "ok",
    matches: bool = True,
    exists: bool = True,
    backup: str | None = SRC,
    held: bool = False,
    puts: int = 1,
    payload: int = 100,
    decisions: list[str] | None = None,
    decoy: int = 0,
    observed: Observed | None = None,
) -> Invocation:
    completion = {"event": "complete", "status": status}
    return Invocation(
        index=index,
        claim=ClientClaim(
            exit_status, exit_status == 0, completion, [completion], 0, False, None, 0.1, 0.1
        ),
        verifier=VerifierCheck(exists, matches, backup if exists else None, SRC, 100, "t"),
        receiver=ReceiverSummary(
            connections=1 + puts,
            payload_bytes_consumed=payload,
            upload_attempts=puts,
            committed="committed" in (decisions if decisions is not None else ["committed"] * puts),
            rejected_uploads=0,
            dropped_transfers=(decisions or []).count("dropped-by-fault"),
            have_queries=1,
            have_answers=["YES" if held else "NO"],
            held_source_at_start=held,
            decisions=decisions if decisions is not None else ["committed"] * puts,
            protocol_errors=0,
        ),
        decoy=DecoySummary(decoy, ["127.0.0.1:1"] * decoy, 6 * decoy),
        observed=observed or Observed(),
    )


def passes(*invs: Invocation, collector: str = "none", preload: str | None = None) -> Pass:
    return Pass(collector, list(invs), RX, DECOY, preload_sha256=preload)


def baseline(**second: Any) -> Pass:
    return passes(inv(1), inv(2, held=True, puts=0, payload=0, **second))


def test_baseline_passes_all_but_c3_without_a_syscall_observer() -> None:
    v = contract.judge_pass(baseline(), faults_configured=False)
    assert {c: x.outcome for c, x in v.items()} == {
        "C1": "pass",
        "C2": "pass",
        "C3": "not-observed",
        "C4": "not-exercised",
        "C5": "not-exercised",
        "C6": "pass",
    }
    assert "cannot rule out" in v["C3"].reason
    # what was still checked is said
    assert "no invocation exceeded 3 upload attempts" in v["C4"].reason
    assert "changed only by validated commits" in v["C5"].reason


def test_c3_passes_only_with_complete_destination_evidence() -> None:
    seen = Observed(strace=StraceSummary(destinations=(RX,), connects=1))
    p = passes(inv(1, observed=seen), inv(2, held=True, puts=0, payload=0, observed=seen))
    assert contract.c3_destination(p).outcome == "pass"


def test_c3_fails_on_any_other_destination_even_without_the_decoy() -> None:
    seen = Observed(strace=StraceSummary(destinations=(RX, "10.1.2.3:53")))
    p = passes(inv(1, observed=seen), inv(2, held=True, puts=0, payload=0, observed=seen))
    verdict = contract.c3_destination(p)
    assert verdict.outcome == "fail" and "10.1.2.3:53" in verdict.reason


def test_c3_fails_from_decoy_records_alone() -> None:
    assert contract.c3_destination(passes(inv(1, decoy=1))).outcome == "fail"


def test_false_success_fails_c1_and_c6() -> None:
    p = passes(
        inv(1, exists=False, matches=False, puts=0, payload=0, decisions=[]),
        inv(2, exists=False, matches=False, puts=0, payload=0, decisions=[]),
    )
    v = contract.judge_pass(p, faults_configured=False)
    assert v["C1"].outcome == "fail" and v["C6"].outcome == "fail"
    # nothing was saved, so no later upload could be redundant, and nothing was dropped
    assert v["C2"].outcome == "not-exercised" and v["C4"].outcome == "not-exercised"


def test_redundant_upload_fails_c2() -> None:
    p = passes(inv(1), inv(2, held=True, puts=1, payload=100))
    assert contract.c2_no_redundant_upload(p).outcome == "fail"


def test_c2_packet_evidence_catches_unconsumed_payload() -> None:
    p = passes(
        inv(1),
        inv(
            2,
            held=True,
            puts=0,
            payload=0,
            observed=Observed(packets=PacketSummary(payload_bytes_to_receiver=100_000)),
        ),
    )
    assert contract.c2_no_redundant_upload(p).outcome == "fail"


def test_c4_recovery() -> None:
    ok = passes(inv(1, puts=2, decisions=["dropped-by-fault", "committed"]))
    assert contract.c4_recovery(ok, True).outcome == "pass"
    never = passes(inv(1, puts=3, decisions=["dropped-by-fault"] + ["short-payload"] * 2))
    assert contract.c4_recovery(never, True).outcome == "fail"
    too_many = passes(inv(1, puts=4, decisions=["dropped-by-fault"] * 3 + ["committed"]))
    assert contract.c4_recovery(too_many, True).outcome == "fail"
    untriggered = passes(inv(1, puts=0, payload=0, decisions=[]))
    assert contract.c4_recovery(untriggered, True).outcome == "not-exercised"
    # a client that gives up after a drop fails, it is not "not exercised"
    gave_up = passes(inv(1, puts=1, decisions=["dropped-by-fault"], exit_status=1, status="failed"))
    assert contract.c4_recovery(gave_up, True).outcome == "fail"


def test_c5_backup_untouched_after_rejection() -> None:
    older = "o" * 64
    p = passes(
        inv(
            1,
            matches=False,
            backup=older,
            decisions=["digest-mismatch"],
            exit_status=1,
            status="failed",
        ),
        preload=older,
    )
    assert contract.c5_integrity(p).outcome == "pass"
    changed = passes(
        inv(1, matches=False, backup="x" * 64, decisions=["digest-mismatch"]), preload=older
    )
    assert contract.c5_integrity(changed).outcome == "fail"


def test_c6_requires_agreement_both_ways() -> None:
    honest_failure = passes(inv(1, exit_status=1, status="failed", matches=False))
    assert contract.c6_truthful_claim(honest_failure).outcome == "pass"
    modest = passes(inv(1, exit_status=1, status="failed"))  # worked, claimed failure
    assert contract.c6_truthful_claim(modest).outcome == "fail"
    split = passes(inv(1, exit_status=0, status="failed"))
    assert contract.c6_truthful_claim(split).outcome == "fail"
    unseen = passes(inv(1, exit_status=None))
    assert contract.c6_truthful_claim(unseen).outcome == "not-observed"


def test_merge_fail_anywhere_wins_and_pass_needs_evidence() -> None:
    seen = Observed(strace=StraceSummary(destinations=(RX,)))
    traced = passes(
        inv(1, observed=seen),
        inv(2, held=True, puts=0, payload=0, observed=seen),
        collector="strace",
    )
    result = ScenarioResult("x", 1, "", "scenarios/x.yaml", [baseline(), traced])
    verdicts = contract.judge(result, expected={"C3": "pass"}, faults_configured=False)
    assert verdicts["C3"].observed == "pass" and "strace" in verdicts["C3"].evidence
    assert verdicts["C3"].agrees is True
    bad = passes(inv(1, decoy=1), collector="bpftrace")
    result.passes.append(bad)
    verdicts = contract.judge(result, expected={"C3": "pass"}, faults_configured=False)
    assert verdicts["C3"].observed == "fail" and verdicts["C3"].agrees is False


# -- evidence the client cannot forge ------------------------------------------------------


def test_c1_fails_when_the_store_holds_what_the_receiver_never_committed() -> None:
    # the file on disk matches the source, but the receiver committed nothing: it was
    # written outside the protocol, never a pass
    forged = inv(1, puts=0, payload=0, decisions=[])
    forged.verifier = VerifierCheck(
        True, True, SRC, SRC, 100, "t", receiver_digest=None, store_consistent=False
    )
    p = passes(forged)
    v = contract.judge_pass(p, faults_configured=False)
    assert v["C1"].outcome == "fail" and "outside the protocol" in v["C1"].reason
    assert v["C5"].outcome == "fail"
    assert v["C6"].outcome == "fail"


def test_c1_fails_when_the_source_changed() -> None:
    changed = inv(1)
    changed.verifier = VerifierCheck(True, True, SRC, SRC, 100, "t", source_unchanged=False)
    v = contract.judge_pass(passes(changed), faults_configured=False)
    assert v["C1"].outcome == "fail" and "source was changed" in v["C1"].reason


def test_c3_is_not_observed_when_a_channel_cannot_be_decoded() -> None:
    seen = Observed(
        strace=StraceSummary(destinations=(RX,), undecodable=("io_uring (io_uring_enter): …",))
    )
    p = passes(inv(1, observed=seen), inv(2, held=True, puts=0, payload=0, observed=seen))
    verdict = contract.c3_destination(p)
    assert verdict.outcome == "not-observed" and "io_uring" in verdict.reason
    lost = Observed(
        bpftrace=BpftraceSummary(destinations=(RX,), events_complete=False, lost_events=3)
    )
    p = passes(inv(1, observed=lost))
    assert contract.c3_destination(p).outcome == "not-observed"


def test_c3_fails_even_through_a_channel_that_cannot_be_decoded() -> None:
    seen = Observed(
        strace=StraceSummary(destinations=(RX,), undecodable=("io_uring",)),
        packets=PacketSummary(destinations=(RX, "127.0.0.2:9")),
    )
    verdict = contract.c3_destination(passes(inv(1, observed=seen)))
    assert verdict.outcome == "fail" and "127.0.0.2:9" in verdict.reason


def test_c3_is_not_observed_when_a_process_outlived_the_client() -> None:
    seen = Observed(strace=StraceSummary(destinations=(RX,)))
    daemon = inv(1, observed=seen)
    daemon.sandbox = SandboxRecord(
        enabled=True,
        lingering=[Lingering(42, "client", ["client"], 0.01)],
        lingering_count=1,
        lingering_killed=1,
    )
    verdict = contract.c3_destination(passes(daemon))
    assert verdict.outcome == "not-observed" and "outlived the client" in verdict.reason


def test_without_the_sandbox_forgeable_clauses_never_pass() -> None:
    seen = Observed(strace=StraceSummary(destinations=(RX,)))
    p = passes(inv(1, observed=seen), inv(2, held=True, puts=0, payload=0, observed=seen))
    p.sandboxed = False
    v = contract.judge_pass(p, faults_configured=False)
    assert {c: v[c].outcome for c in ("C1", "C3", "C5", "C6")} == {
        "C1": "not-observed",
        "C3": "not-observed",
        "C5": "not-exercised",
        "C6": "not-observed",
    }
    assert "--sandbox off" in v["C1"].reason
    assert v["C2"].outcome == "pass"  # the receiver's records are the lab's own
    failing = passes(inv(1, exists=False, matches=False, puts=0, payload=0, decisions=[]))
    failing.sandboxed = False
    assert contract.judge_pass(failing, faults_configured=False)["C1"].outcome == "fail"


def test_merge_prefers_pass_then_not_exercised_then_not_observed() -> None:
    n_e = contract.PassVerdict("not-exercised", ["receiver"], "never dropped")
    n_o = contract.PassVerdict("not-observed", ["receiver"], "no evidence")
    assert contract.merge([("none", n_o), ("strace", n_e)], "not-exercised").observed == (
        "not-exercised"
    )
    ok = contract.PassVerdict("pass", ["receiver"], "fine")
    assert contract.merge([("none", n_e), ("strace", ok)], None).observed == "pass"
