"""The judgement of a candidate from its judged repetitions: pure functions of the results
model, shared by ``lab evaluate`` (:mod:`lab.evaluate.judge`), ``lab campaign`` and
``lab merge`` (which concludes one evaluation from every shard's repetitions).

    counts = clause_counts(results)          # C1..C6 -> ClauseCounts over every repetition
    judged = conclude(record, results, size=524_288, timing=timing, timing_skipped=None)
    judged.status, judged.status_reason

Nothing here runs a process or reads a file: the same repetitions give the same judgement,
whichever machine (or shard) ran them.
"""

from __future__ import annotations

from dataclasses import replace

from lab.model import CLAUSES, ScenarioResult
from lab.model.evaluation import (
    ClauseCounts,
    ClientContract,
    ContractViolation,
    DiagnosticRow,
    Evaluation,
    InstrumentCheck,
    Timing,
)

CALIBRATION_SCENARIOS = ("false-success", "unexpected-egress")


def failed_clauses(scenarios: list[ScenarioResult]) -> dict[str, str]:
    """Clause -> why it did not pass the evaluation. A clause passes when it passed in every
    repetition that exercised it: ``not-exercised`` (the condition never created the
    clause's situation) is neither a pass nor a fail. See :func:`unexercised_clauses`."""
    if not scenarios:
        return {c: "no condition was judged" for c in CLAUSES}
    why: dict[str, str] = {}
    for c in CLAUSES:
        outcomes = [
            s.verdicts[c].observed if c in s.verdicts else "not-observed" for s in scenarios
        ]
        bad = sorted({o for o in outcomes if o not in ("pass", "not-exercised")})
        if bad:
            why[c] = " and ".join(bad)
    return why


def unexercised_clauses(scenarios: list[ScenarioResult]) -> list[str]:
    """Clauses no condition exercised: what they still checked passed, but their situation
    (a mismatching payload, say) never arose, so the evaluation says so beside its status."""
    return [
        c
        for c in CLAUSES
        if scenarios
        and all(c in s.verdicts and s.verdicts[c].observed == "not-exercised" for s in scenarios)
    ]


def clause_counts(scenarios: list[ScenarioResult]) -> dict[str, ClauseCounts]:
    """Each clause's outcomes over every repetition of every condition."""
    counts: dict[str, dict[str, int]] = {
        c: {"pass": 0, "fail": 0, "not-observed": 0, "not-exercised": 0} for c in CLAUSES
    }
    for s in scenarios:
        for c in CLAUSES:
            v = s.verdicts.get(c)
            if v is not None:
                counts[c][v.observed] += 1
    return {
        c: ClauseCounts(
            passed=row["pass"],
            failed=row["fail"],
            not_observed=row["not-observed"],
            not_exercised=row["not-exercised"],
            total=len(scenarios),
        )
        for c, row in counts.items()
    }


def client_contract(results: list[ScenarioResult]) -> ClientContract:
    """Did the candidate honour client contract v1 (docs/client-contract.md) in every
    invocation: JSON event lines, a final completion event, exit status agreeing with it?"""
    violations = [
        ContractViolation(
            condition=s.name,
            repetition=s.repetition,
            pass_name=p.collector,
            invocation=inv.index,
            problem=problem,
        )
        for s in results
        for p in s.passes
        for inv in p.invocations
        for problem in [
            *inv.claim.contract_violations,
            *_lingering(inv.sandbox.lingering_count if inv.sandbox else 0),
            *_refused(inv.sandbox.refused_calls if inv.sandbox else {}),
        ]
    ]
    return ClientContract(
        honoured=not violations,
        violations=tuple(violations[:50]),
        violation_count=len(violations),
    )


def _lingering(count: int) -> list[str]:
    """Contract v1: the client's work ends when it exits (nothing left running)."""
    if not count:
        return []
    return [f"left {count} process(es) running after it exited (they were killed)"]


def _refused(calls: dict[str, int]) -> list[str]:
    """The sandbox's filter refused calls a backup client never needs (lab.sandbox.seccomp);
    the kernel's audit log saw each one, outside the client."""
    if not calls:
        return []
    shown = ", ".join(f"{name} x{count}" for name, count in sorted(calls.items()))
    return [
        f"made {sum(calls.values())} system call(s) the sandbox refuses ({shown}; seen by the "
        "kernel audit log)"
    ]


def instrument_check(results: list[ScenarioResult]) -> InstrumentCheck:
    """Did the lab catch the seeded defects here, with these collectors?"""
    caught: dict[str, dict[str, str]] = {}
    for s in results:
        want = {"false-success": ("C1", "C6"), "unexpected-egress": ("C3",)}[s.name]
        caught[s.name] = {c: s.verdicts[c].observed for c in want if c in s.verdicts}
    ok = all(v == "fail" for row in caught.values() for v in row.values()) and len(caught) == 2
    return InstrumentCheck(scenarios=CALIBRATION_SCENARIOS, caught=caught, ok=ok)


def diagnostics(scenarios: list[ScenarioResult], size: int) -> tuple[DiagnosticRow, ...]:
    """Unnecessary-work diagnostics from the traced passes (not timings)."""
    rows: list[DiagnosticRow] = []
    for s in scenarios:
        for inv in s.invocations():
            strace, bpf, cpu_s = inv.observed.strace, inv.observed.bpftrace, inv.claim.cpu_s
            read = None if strace is None else strace.source_bytes_read
            rows.append(
                DiagnosticRow(
                    condition=s.name,
                    repetition=s.repetition,
                    invocation=inv.index,
                    source_bytes_read=read,
                    read_ratio=None if read is None else round(read / size, 3),
                    hash_file_calls=None if bpf is None else bpf.hash_calls,
                    # rounded as results.json records it
                    cpu_s_untraced=None if cpu_s is None else round(cpu_s, 6),
                    missing=tuple(k for k in ("bpftrace", "strace") if k not in inv.observed),
                )
            )
    return tuple(rows)


def hung_invocations(scenarios: list[ScenarioResult]) -> int:
    """Judged invocations that reached the time limit (the candidate hung)."""
    return sum(
        1 for s in scenarios for p in s.passes for inv in p.invocations if inv.claim.timed_out
    )


def hung_reason(hung: int, timeout_s: float) -> str:
    """Why a candidate that hung is not timed: its rounds would measure the limit."""
    return (
        f"not timed: the candidate reached the {timeout_s:g} s limit in {hung} "
        "judged invocation(s), so its timing would measure the limit"
    )


def conclude(
    record: Evaluation,
    results: list[ScenarioResult],
    *,
    size: int,
    timing: Timing | None,
    timing_skipped: str | None,
) -> Evaluation:
    """``record`` (frozen part, candidate, instrument check) completed with the judgement of
    ``results``: every condition's repetitions, on one machine or gathered from shards."""
    failed = failed_clauses(results)
    reason: str | None = None
    if failed:
        reason = "; ".join(f"{c}: {why}" for c, why in failed.items()) + (
            " (a clause passes only when it passed in every repetition that exercised it)"
        )
    unexercised = unexercised_clauses(results)
    if unexercised:
        note = (
            f"{', '.join(unexercised)} not exercised by any condition: only what such a "
            "verdict still checks (its reason says what) was checked"
        )
        reason = note if reason is None else f"{reason}; {note}"
    return replace(
        record,
        status="fail" if failed else "pass",
        status_reason=reason,
        clauses=clause_counts(results),
        client_contract=client_contract(results),
        diagnostics=diagnostics(results, size),
        timing=timing,
        timing_skipped=timing_skipped,
    )
