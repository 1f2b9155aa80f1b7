"""Safe-store's oracle: clauses S3 (contained), S4 (legitimate names land) and S5 (scope)
of one candidate tree, each decided from evidence the lab gathers itself and keeps in
``out`` (S1 and S2, the fixture's own tests and ``go vet``, are the task's verification
commands and are run elsewhere).

    judged = judge_candidate(tree, fixture=fixture, out=out, editable=["store.go"],
                             protected=["store_test.go"], gocache=cache)
    judged.clauses["S3"].verdict, judged.clauses["S3"].evidence, judged.figures

A capability this machine lacks (``go``, ``strace``, the sandbox) makes the clauses that
need it ``not-observed`` with the reason, never ``pass`` or ``fail``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lab.workloads.safestore.gobuild as gobuild
import lab.workloads.safestore.scope as scope
from lab.collectors.strace import StraceCollector
from lab.errors import SandboxError, ToolMissingError, WorkloadError
from lab.host import procs
from lab.model.safestore import ClauseResult, Figure, SafeStoreJudgement
from lab.sandbox import Sandbox
from lab.workloads.safestore.contain import evidence_text, witness
from lab.workloads.safestore.plan import Layout, listing_changes
from lab.workloads.safestore.sandboxed import HarnessRun, run_harness

#: writes made through the racing directory. Measured (benchmarks/safestore_race.py, a
#: shared 2-core VM at load 10): a check-then-write Store let 4 to 28 of 400 land outside
#: (median 9.5) and failed S3 in 20 of 20 evaluations, the harness taking about 5 s
DEFAULT_ATTEMPTS = 400


def _unobserved(reason: str, *evidence: str) -> ClauseResult:
    return ClauseResult("not-observed", reason, tuple(evidence))


def judge_candidate(
    tree: Path,
    *,
    fixture: Path,
    out: Path,
    editable: Sequence[str],
    protected: Sequence[str],
    gocache: Path,
    attempts: int | None = None,
    timeout_s: float = 60.0,
    sandbox: Sandbox | None = None,
) -> SafeStoreJudgement:
    """Judge ``tree`` (protected files already restored) against safe-store's S3–S5.

    ``sandbox``: the caller's, when it has one open (else one is opened and closed here)."""
    for path, what in ((tree, "candidate tree"), (fixture, "fixture")):
        if not (path / "go.mod").is_file():
            raise WorkloadError(f"the {what} {path} holds no go.mod; give a Go module's directory.")
    out.mkdir(parents=True, exist_ok=True)
    gocache.mkdir(parents=True, exist_ok=True)
    log = procs.CommandLog(out / "commands.jsonl", root=out)
    figures: dict[str, Figure] = {"attempts": attempts or DEFAULT_ATTEMPTS}
    scratch = Path(tempfile.mkdtemp(prefix="lab-safestore-"))
    try:
        env = gobuild.go_env(gocache, scratch / "home")
        missing_go = gobuild.go_available()
        figures["go_version"] = None if missing_go else gobuild.go_version(env)
        s5 = _scope(tree, fixture, out, editable, protected, scratch, env, missing_go, log)
        if missing_go is not None:
            s3 = s4 = _unobserved(missing_go)
        else:
            s3, s4 = _run(tree, out, scratch, env, figures, log, sandbox, attempts, timeout_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    judged = SafeStoreJudgement({"S3": s3, "S4": s4, "S5": s5}, figures)
    (out / "judgement.json").write_text(
        json.dumps(judged.to_dict(), indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    return judged


def _scope(
    tree: Path,
    fixture: Path,
    out: Path,
    editable: Sequence[str],
    protected: Sequence[str],
    scratch: Path,
    env: dict[str, str],
    missing_go: str | None,
    log: procs.CommandLog,
) -> ClauseResult:
    changed = scope.changed_files(tree, fixture)
    stray = scope.outside_scope(changed, editable=editable)
    touched = scope.protected_changed(changed, protected=protected)
    lines = [f"changed: {p}" for p in changed] or ["changed: nothing"]
    lines += [f"not editable: {p}" for p in stray] + [f"protected: {p}" for p in touched]
    problems = [f"{len(stray)} changed file(s) not editable ({', '.join(stray)})"] if stray else []
    if touched:
        problems.append(f"protected file(s) changed ({', '.join(touched)})")
    evidence = ["scope.txt"]
    api_problem: str | None = None
    if missing_go is not None:
        api_problem = f"the exported API was not compared: {missing_go}"
    else:
        built = gobuild.build_apidump(scratch, env=env, out=out, log=log)
        if built.binary is None:
            api_problem = f"the exported API was not compared: {built.error}"
            evidence.append(built.log.name)
        else:
            before = gobuild.api_of(fixture, built.binary, out=out / "api-fixture.txt", log=log)
            after = gobuild.api_of(tree, built.binary, out=out / "api-candidate.txt", log=log)
            evidence += ["api-fixture.txt", "api-candidate.txt"]
            if before is None:
                api_problem = "the fixture's exported API could not be read (api-fixture.err)"
            elif after is None:
                problems.append("the candidate's Go files do not parse (api-candidate.err)")
            else:
                diff = scope.api_diff(before, after)
                lines += diff
                if diff:
                    problems.append("the exported API changed (see scope.txt)")
    (out / "scope.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if problems:
        return ClauseResult("fail", "; ".join(problems) + ".", tuple(evidence))
    if api_problem is not None:
        return ClauseResult("not-observed", api_problem, tuple(evidence))
    return ClauseResult(
        "pass",
        f"{len(changed)} file(s) changed, all editable; the exported API is the fixture's.",
        tuple(evidence),
    )


def _run(
    tree: Path,
    out: Path,
    scratch: Path,
    env: dict[str, str],
    figures: dict[str, Figure],
    log: procs.CommandLog,
    sandbox: Sandbox | None,
    attempts: int | None,
    timeout_s: float,
) -> tuple[ClauseResult, ClauseResult]:
    built = gobuild.build_harness(tree, scratch, env=env, out=out, log=log)
    figures["harness_build_s"] = round(built.seconds, 3)
    if built.binary is None:
        why = (
            f"the harness does not build against the candidate ({built.error}; "
            f"see {built.log.name})"
        )
        return _unobserved(why, built.log.name), ClauseResult("fail", why + ".", (built.log.name,))
    own = sandbox is None
    try:
        box = sandbox or Sandbox.open(f"safestore-{time.time_ns() % 10**9}", log=log)
    except (SandboxError, ToolMissingError) as error:
        why = f"the client sandbox is not available here: {error}"
        return _unobserved(why), _unobserved(why)
    try:
        strace = StraceCollector.probe()
        base = scratch / "work"
        layout = Layout.plant(
            base, uid=box.user.uid, gid=box.user.gid, attempts=attempts or DEFAULT_ATTEMPTS
        )
        (out / "plan.json").write_text(layout.plan_json(), encoding="utf-8")
        before = layout.outside_listing()
        ran = run_harness(
            box,
            harness=built.binary,
            layout=layout,
            out=out,
            timeout_s=timeout_s,
            traced=strace.available,
        )
        after = layout.outside_listing()
        _write_listing(out / "outside-before.txt", before)
        _write_listing(out / "outside-after.txt", after)
        changes = listing_changes(before, after)
        report = _harness_lines(ran.stdout)
        figures.update(_figures(ran, report, changes))
        return (
            _contained(ran, layout, changes, report, strace.reason, out, figures),
            _landed(ran, layout, report, out),
        )
    finally:
        if own:
            box.close()


def _write_listing(path: Path, listing: dict[str, str]) -> None:
    path.write_text("".join(f"{k}\t{v}\n" for k, v in listing.items()), encoding="utf-8")


def _harness_lines(stdout: Path) -> dict[str, Any]:
    """The harness's JSON lines by phase (what it tried: never taken as a verdict)."""
    report: dict[str, Any] = {"legit": {}, "hostile": {}, "race": None, "done": False}
    try:
        text = stdout.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return report
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        phase = row.get("phase")
        if phase in ("legit", "hostile"):
            report[phase][str(row.get("name"))] = row.get("error")
        elif phase == "race":
            report["race"] = row
        elif phase == "done":
            report["done"] = True
    return report


def _figures(ran: HarnessRun, report: dict[str, Any], changes: list[str]) -> dict[str, Figure]:
    race = report["race"] or {}
    swaps = str(race.get("swaps", ""))
    return {
        "harness_exit_status": ran.outcome.exit_status,
        "harness_pid": ran.outcome.main_pid,
        "harness_wall_s": round(ran.outcome.wall_s, 3),
        "race_write_errors": race.get("errors"),
        "race_swaps": int(swaps) if swaps.isdigit() else None,
        "race_escapes": sum(1 for c in changes if c.startswith("added outside/w-")),
        "outside_changes": len(changes),
        "hostile_rejected": sum(1 for e in report["hostile"].values() if e is not None),
    }


def _contained(
    ran: HarnessRun,
    layout: Layout,
    changes: list[str],
    report: dict[str, Any],
    strace_missing: str | None,
    out: Path,
    figures: dict[str, Figure],
) -> ClauseResult:
    evidence = ["outside-before.txt", "outside-after.txt", "harness.stdout", "harness.stderr"]
    if ran.outcome.sandbox_error:
        return _unobserved(f"the harness did not run: {ran.outcome.sandbox_error}", *evidence)
    kernel: list[str] = []
    complete = False
    if ran.trace is not None and ran.trace.exists() and ran.outcome.main_pid is not None:
        found = witness(
            ran.trace.read_text(encoding="utf-8", errors="replace"),
            client_pid=ran.outcome.main_pid,
            layout=layout,
            changes=changes,
        )
        (out / "s3-violations.txt").write_text(evidence_text(found), encoding="utf-8")
        evidence = [ran.trace.name, "s3-violations.txt", *evidence]
        kernel = [what for what, _ in found.violations]
        if found.violations:  # the first violating call and its trace lines, verbatim
            what, lines = found.violations[0]
            figures["kernel_witness"] = "\n".join([what, *lines[:6]])
        complete = found.complete and found.found_harness
        figures["kernel_violations"] = len(kernel)
        figures["attacker_pids"] = len(found.attacker_pids)
    if kernel or changes:
        parts = []
        if kernel:
            parts.append(
                f"the kernel saw {len(kernel)} call(s) write outside the root (first: {kernel[0]})"
            )
        if changes:
            parts.append(
                f"{len(changes)} change(s) appeared outside the root (first: {changes[0]})"
            )
        return ClauseResult("fail", "; ".join(parts) + ".", tuple(evidence))
    gaps = _gaps(ran, report, strace_missing, complete)
    if gaps:
        return ClauseResult("not-observed", gaps, tuple(evidence))
    race = report["race"]
    return ClauseResult(
        "pass",
        f"no call of the harness created, wrote, renamed or linked anything outside the root "
        f"(strace -f -yy) and the outside is unchanged, under {len(report['hostile'])} hostile "
        f"names and {race.get('attempts')} writes raced by {race.get('swaps')} swaps.",
        tuple(evidence),
    )


def _gaps(
    ran: HarnessRun, report: dict[str, Any], strace_missing: str | None, complete: bool
) -> str | None:
    """Why a clean run does not show containment, or None when it does."""
    if ran.trace is None:
        return f"no kernel witness: strace is not available ({strace_missing})"
    if ran.outcome.timed_out:
        return "the harness did not finish within its time limit; the trace is incomplete"
    if not complete:
        return "the strace trace does not hold the harness's run to its end"
    if not report["done"]:
        return (
            f"the harness stopped (exit status {ran.outcome.exit_status}) before trying "
            "every hostile name and the race"
        )
    race = report["race"] or {}
    if race.get("error") or not str(race.get("swaps", "")).isdigit() or int(race["swaps"]) < 2:
        return f"the attacker did not race the writes ({race.get('error') or 'no swaps'})"
    return None


def _landed(ran: HarnessRun, layout: Layout, report: dict[str, Any], out: Path) -> ClauseResult:
    if ran.outcome.sandbox_error:
        return _unobserved(f"the harness did not run: {ran.outcome.sandbox_error}")
    landed = layout.read_back()
    lines = []
    wrong = []
    for name, problem in landed.items():
        said = report["legit"].get(name, "not tried (the harness stopped)")
        if problem is None and said is None:
            lines.append(f"ok {name}")
            continue
        detail = problem or "content right"
        if said is not None:
            detail += f"; Write returned: {said}"
        lines.append(f"wrong {name}: {detail}")
        wrong.append(f"{name} ({detail})")
    (out / "s4-readback.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    evidence = ("s4-readback.txt", "harness.stdout")
    if wrong:
        return ClauseResult(
            "fail",
            f"{len(wrong)} of {len(landed)} legitimate names did not "
            f"land with their content: {'; '.join(wrong[:3])}.",
            evidence,
        )
    return ClauseResult(
        "pass",
        f"all {len(landed)} legitimate names landed inside the root "
        "with the content written (read back by the lab).",
        evidence,
    )
