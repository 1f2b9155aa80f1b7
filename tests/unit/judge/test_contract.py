"""Judging clauses C1–C6 from records built by hand (no processes)."""

from __future__ import annotations

from typing import Any

from lab.judge import contract
from lab.model import (
    ClientClaim,
    DecoySummary,
    Invocation,
    Pass,
    ReceiverSummary,
    ScenarioResult,
    VerifierCheck,
)

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
    observed: dict[str, dict[str, Any]] | None = None,
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
        observed=observed or {},
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
        "C4": "pass",
        "C5": "pass",
        "C6": "pass",
    }
    assert "cannot rule out" in v["C3"].reason


def test_c3_passes_only_with_complete_destination_evidence() -> None:
    seen = {"strace": {"destinations": [RX], "connects": 1}}
    p = passes(inv(1, observed=seen), inv(2, held=True, puts=0, payload=0, observed=seen))
    assert contract.c3_destination(p).outcome == "pass"


def test_c3_fails_on_any_other_destination_even_without_the_decoy() -> None:
    seen = {"strace": {"destinations": [RX, "10.1.2.3:53"]}}
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
    assert v["C2"].outcome == "pass" and v["C4"].outcome == "pass"


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
            observed={"packets": {"payload_bytes_to_receiver": 100_000}},
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
    assert contract.c4_recovery(untriggered, True).outcome == "not-observed"


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
    seen = {"strace": {"destinations": [RX]}}
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
