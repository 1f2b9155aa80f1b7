"""Candidate evaluation: judge a client someone else wrote against the frozen contract.

1. Freeze: the contract, scenarios, fixture, limits and the lab's own version are hashed
   into an evaluation id, recorded before the candidate runs.
2. Prepare the candidate in a workspace *copy* and build it (:mod:`lab.evaluate.candidate`);
   a failed build is a result.
3. Check the instrument first: the seeded ``false-success`` and ``unexpected-egress`` run on
   the same machine with the same collectors; if the lab does not catch them, it refuses to
   judge.
4. Run the contract conditions N times (fresh state each), judge C1–C6 from independent
   evidence; time the candidate and the baseline untraced, in alternation
   (:mod:`lab.evaluate.timing`).

    outcome = execute(EvaluationRequest(kind="patch", path=Path("agent.patch")), say=print)
    outcome.evaluation["status"], outcome.archive, outcome.exit_status

``execute`` prints nothing: progress goes to ``say`` and the CLI draws the outcome.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from lab import __version__
from lab.errors import UsageError
from lab.evaluate import floor, timing
from lab.evaluate.candidate import BUILD_TIMEOUT_S, build, prepare
from lab.evaluate.model import (
    ClauseCounts,
    ClientContract,
    ContractViolation,
    DiagnosticRow,
    Evaluation,
    EvaluationLimits,
    Fixture,
    FrozenEvaluation,
    InstrumentCheck,
    Timing,
)
from lab.evaluate.request import EvaluationRequest
from lab.evidence.archive import ArchiveInfo
from lab.host import identity, procs
from lab.host.clock import epoch_to_rfc3339
from lab.model import CLAUSES, RunResult, ScenarioResult
from lab.run import scenario
from lab.run.fixture import sha256_file
from lab.run.options import check_count, check_run_options
from lab.run.orchestrate import (
    REPO,
    Setup,
    finish,
    make_result,
    new_run_id,
    open_run,
    run_plan,
    setup,
)
from lab.run.plan import Plan

CALIBRATION_SCENARIOS = ("false-success", "unexpected-egress")


#: files whose content defines what "passing" means; their hash is the evaluation id
FROZEN_FILES = (
    "lab/judge/contract.py",
    "lab/judge/calibration.py",
    "lab/run/receiver.py",
    "lab/run/records.py",
    "lab/run/store.py",
    "lab/run/upload.py",
    "lab/run/backup_check.py",
    "lab/run/protocol.py",
    "lab/run/fixture.py",
    "docs/client-contract.md",
    "docs/protocol.md",
)


def freeze(
    conditions: list[scenario.Scenario],
    *,
    size: int,
    repetitions: int,
    limits: EvaluationLimits,
) -> FrozenEvaluation:
    """Everything that defines the judgement, hashed before the candidate runs."""
    files = {rel: sha256_file(REPO / rel) for rel in FROZEN_FILES if (REPO / rel).is_file()}
    for s in conditions:
        files[f"scenarios/candidate/{s.path.name}"] = hashlib.sha256(s.text.encode()).hexdigest()
    fixture = Fixture(generator="shake_256 lab-fixture-v1", size=size)
    # the id hashes the record without itself: the same inputs always give the same id
    unnamed = {
        "lab_version": __version__,
        "files": files,
        "fixture": fixture.to_dict(),
        "repetitions": repetitions,
        "limits": limits.to_dict(),
    }
    blob = json.dumps(unnamed, sort_keys=True).encode()
    return FrozenEvaluation(
        evaluation_id="eval-" + hashlib.sha256(blob).hexdigest()[:16],
        lab_version=__version__,
        files=files,
        fixture=fixture,
        repetitions=repetitions,
        limits=limits,
    )


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


@dataclass(frozen=True)
class EvaluationOutcome:
    """What an evaluation produced. When it was delegated to the lab image, only the exit
    status comes back here: the evaluation record is in that run's archive."""

    #: 0 only when every clause passed in every repetition of every condition
    exit_status: int
    evaluation: Evaluation | None = None
    result: RunResult | None = None
    run_dir: Path | None = None
    archive: ArchiveInfo | None = None


def execute(request: EvaluationRequest, *, say: Callable[[str], None]) -> EvaluationOutcome:
    """Freeze, prepare, check the instrument, judge, time, write and sign; print nothing."""
    check_run_options(
        repetitions=request.repetitions,
        size=request.size,
        timeout_s=request.timeout_s,
        out=request.out,
        client=None,  # the candidate is built later, in a copy
    )
    check_count(request.timing_runs, "--timing-runs")
    if not request.local and not identity.in_lab_image():
        return EvaluationOutcome(exit_status=_in_image(request))

    conditions = scenario.select(REPO / "scenarios" / "candidate", [], True)
    calibration = scenario.select(REPO / "scenarios", list(CALIBRATION_SCENARIOS), False)
    limits = EvaluationLimits(
        invocation_timeout_s=request.timeout_s,
        build_timeout_s=BUILD_TIMEOUT_S,
        timing_runs=request.timing_runs,
    )
    given = request.path
    if not given.exists():
        raise UsageError(f"{given}: no such file or directory; give the candidate's path.")
    frozen = freeze(conditions, size=request.size, repetitions=request.repetitions, limits=limits)
    prepared: Setup = setup(request.collector, request.packets, archive=True, say=say)

    run_id = new_run_id("eval")
    # a candidate is untrusted code: it only ever runs in the sandbox, judged or timed
    run_dir = open_run(prepared, request.out, run_id, sandbox="required")
    try:
        return _evaluate(request, prepared, frozen, run_id, run_dir, conditions, calibration, say)
    finally:
        prepared.close()


def _evaluate(
    request: EvaluationRequest,
    prepared: Setup,
    frozen: FrozenEvaluation,
    run_id: str,
    run_dir: Path,
    conditions: list[scenario.Scenario],
    calibration: list[scenario.Scenario],
    say: Callable[[str], None],
) -> EvaluationOutcome:
    given = request.path
    frozen_json = json.dumps(frozen.to_dict(), indent=2, sort_keys=True) + "\n"
    (run_dir / "evaluation.json").write_text(frozen_json)
    say(
        f"Evaluation {frozen.evaluation_id} frozen before the candidate runs: "
        f"{run_dir / 'evaluation.json'}"
    )
    started_epoch = time.time()
    log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
    kind = request.kind
    cand_dir = run_dir / "candidate"
    cand_dir.mkdir()
    if kind == "patch":
        shutil.copyfile(given, cand_dir / "candidate.patch")
    elif kind == "source-dir":
        shutil.copytree(given, cand_dir / "source", ignore=shutil.ignore_patterns(".git", "*.o"))

    with tempfile.TemporaryDirectory(prefix="lab-candidate-") as tmp:
        candidate = prepare(kind, given, Path(tmp), log)
        for name in ("patch.log", "patch.err"):
            if (Path(tmp) / name).exists():
                shutil.copyfile(Path(tmp) / name, cand_dir / name)
        build(candidate, log, cand_dir)
        say(f"Candidate ({kind}): {candidate.build.status}")
        scenario_results: list[ScenarioResult] = []
        if candidate.binary is None:
            evaluation = Evaluation(
                frozen=frozen,
                candidate=candidate.describe(),
                status="patch-failed"
                if candidate.build.status == "patch-failed"
                else "build-failed",
                status_reason="the candidate could not be built; see its build log",
            )
        else:
            record = Evaluation(frozen=frozen, candidate=candidate.describe(), status="fail")
            shutil.copyfile(candidate.binary, cand_dir / "candidate-client")
            evaluation, scenario_results = _judge(
                request, record, candidate.binary, prepared, run_dir, conditions, calibration, say
            )
    result: RunResult = make_result(
        run_id=run_id,
        started=epoch_to_rfc3339(started_epoch),
        options=request.options("evaluate", [s.name for s in conditions]),
        prepared=prepared,
        packets=request.packets,
        scenario_results=scenario_results,
        client=cand_dir / "candidate-client",
    )
    result.evaluation = evaluation
    archive = finish(result, run_dir, signer=prepared.signer, started_epoch=started_epoch, say=say)
    return EvaluationOutcome(
        exit_status=0 if evaluation.status == "pass" else 1,
        evaluation=evaluation,
        result=result,
        run_dir=run_dir,
        archive=archive,
    )


def _in_image(request: EvaluationRequest) -> int:
    """Run this very evaluation inside the lab image (built and cached by lab.container),
    with the candidate mounted read-only; the archive lands in the host's --out."""
    from lab.container import run as container
    from lab.container.engine import Context

    host: Path = request.path.resolve()
    if not host.exists():
        raise UsageError(f"{host}: no such file or directory; give the candidate's path.")
    inside = f"/lab/candidate/{host.name}"
    argv = request.argv(candidate=inside, out=container.CONTAINER_ARTIFACTS)
    ctx = Context.for_repo(REPO, artifacts=request.out.resolve())
    done = container.run_lab(ctx, argv, mounts=((host, inside),))
    return int(done.exit_status or 0)


def check_instrument(
    request: EvaluationRequest,
    prepared: Setup,
    run_dir: Path,
    calibration: list[scenario.Scenario],
    say: Callable[[str], None],
) -> tuple[InstrumentCheck, list[ScenarioResult]]:
    """Run the seeded ``false-success`` and ``unexpected-egress`` here, with these
    collectors, and say whether the lab caught them (``lab campaign`` does it once)."""
    say("Checking the instrument on this machine (false-success, unexpected-egress)…")
    cal_plan = Plan(
        scenarios=calibration,
        passes=prepared.passes,
        packets=request.packets,
        size=request.size,
        client=REPO / "native" / "backup-client",
        timeout_s=request.timeout_s,
        unavailable=prepared.skipped,
        seed="calibration",
    )
    cal_results = run_plan(cal_plan, run_dir, prepared, say)
    return instrument_check(cal_results), cal_results


def _judge(
    request: EvaluationRequest,
    record: Evaluation,
    binary: Path,
    prepared: Setup,
    run_dir: Path,
    conditions: list[scenario.Scenario],
    calibration: list[scenario.Scenario],
    say: Callable[[str], None],
) -> tuple[Evaluation, list[ScenarioResult]]:
    """Check the instrument, then judge and time the built candidate; ``record`` (frozen
    part and candidate) comes back completed with the judgement."""
    check, cal_results = check_instrument(request, prepared, run_dir, calibration, say)
    if not check.ok:
        why = (
            "the instrument did not catch the seeded defects on this machine with these "
            "collectors, so it refuses to judge the candidate"
        )
        refused = replace(record, status="refused", status_reason=why, instrument_check=check)
        return refused, cal_results
    judged, results = judge_built(request, record, binary, prepared, run_dir, conditions, say)
    return replace(judged, instrument_check=check), cal_results + results


def judge_built(
    request: EvaluationRequest,
    record: Evaluation,
    binary: Path,
    prepared: Setup,
    run_dir: Path,
    conditions: list[scenario.Scenario],
    say: Callable[[str], None],
    *,
    timed: bool = True,
    timing_size: int | None = None,
) -> tuple[Evaluation, list[ScenarioResult]]:
    """Judge a built candidate under ``conditions`` × repetitions and time it untraced
    against the baseline (``timed=False`` skips the timing: the baseline itself), at
    ``timing_size`` bytes when given (a campaign's speed goal), else the judged size."""
    seeded = REPO / "native" / "backup-client"
    say(f"Judging the candidate: {len(conditions)} conditions × {request.repetitions} repetitions")
    plan = Plan(
        scenarios=conditions,
        passes=prepared.passes,
        packets=request.packets,
        repetitions=request.repetitions,
        size=request.size,
        client=binary,
        client_kind="candidate",
        timeout_s=request.timeout_s,
        unavailable=prepared.skipped,
        seed="candidate",
    )
    results = run_plan(plan, run_dir, prepared, say)
    clauses = clause_counts(results)
    contract = client_contract(results)
    rows = diagnostics(results, request.size)
    hung = sum(1 for s in results for p in s.passes for inv in p.invocations if inv.claim.timed_out)
    timing_result: Timing | None = None
    timing_skipped: str | None = None
    if not timed:
        timing_skipped = "not timed: this is the baseline itself"
    elif hung:
        # a candidate that hangs would only spend the rounds waiting for its time limit
        timing_skipped = (
            f"not timed: the candidate reached the {request.timeout_s:g} s limit in {hung} "
            "judged invocation(s), so its timing would measure the limit"
        )
        say(f"Untraced timing skipped: {timing_skipped}")
    else:
        say(
            f"Untraced timing: {request.timing_runs} rounds, baseline, candidate and the "
            "instrument floor's reference uploader alternated…"
        )
        log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
        with tempfile.TemporaryDirectory(prefix="lab-timing-") as scratch:
            reference = floor.build(Path(scratch) / "floor", log)
            clients = {"baseline": seeded, "candidate": binary}
            if reference.binary is not None:
                clients["floor"] = reference.binary
            else:
                say(f"Instrument floor not measured: {reference.reason}")
            timing_result = timing.alternate(
                clients,
                rounds=request.timing_runs,
                size=timing_size or request.size,
                workdir=Path(scratch),
                log=log,
                timeout=request.timeout_s,
                sandbox=prepared.sandbox,
                floor=reference.describe(),
            )
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
    judged = replace(
        record,
        status="fail" if failed else "pass",
        status_reason=reason,
        clauses=clauses,
        client_contract=contract,
        diagnostics=rows,
        timing=timing_result,
        timing_skipped=timing_skipped,
    )
    return judged, results
