"""Candidate evaluation: judge a client someone else wrote against the frozen contract.

1. Freeze: the contract, scenarios, fixture, limits and the lab's own version are hashed
   into an evaluation id, recorded before the candidate runs.
2. Prepare the candidate in a workspace *copy* (a patch applied to a copy of ``native/``, a
   copied source tree, or a copied binary) and build it; a failed build is a result.
3. Check the instrument first: the seeded ``false-success`` and ``unexpected-egress`` run on
   the same machine with the same collectors; if the lab does not catch them, it refuses to
   judge.
4. Run the contract conditions N times (fresh state each), judge C1–C6 from independent
   evidence; time the candidate and the baseline untraced, in alternation.

    python -m lab evaluate --patch agent.patch --repetitions 3 --local --out artifacts
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from lab import __version__
from lab.errors import UsageError
from lab.evaluate import timing
from lab.host import identity, procs
from lab.host.clock import epoch_to_rfc3339
from lab.model import CLAUSES, RunResult, ScenarioResult
from lab.run import scenario
from lab.run.fixture import sha256_file
from lab.run.orchestrate import REPO, Setup, finish, make_result, new_run_id, run_plan, setup
from lab.run.runner import Plan

CALIBRATION_SCENARIOS = ("false-success", "unexpected-egress")
#: files whose content defines what "passing" means; their hash is the evaluation id
FROZEN_FILES = (
    "lab/judge/contract.py",
    "lab/judge/calibration.py",
    "lab/run/receiver.py",
    "lab/run/backup_check.py",
    "lab/run/protocol.py",
    "lab/run/fixture.py",
    "docs/client-contract.md",
    "docs/protocol.md",
)
BUILD_TIMEOUT_S = 300.0


@dataclass
class Candidate:
    kind: str  # "patch" | "source-dir" | "binary"
    given: Path
    workspace: Path
    input_sha256: str
    binary: Path | None = None
    build: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "input_name": self.given.name,
            "input_sha256": self.input_sha256,
            "binary_sha256": sha256_file(self.binary) if self.binary else None,
            "build": self.build,
        }


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if "/." in f"/{rel}" or rel.endswith((".o", ".pyc")):
            continue
        digest.update(rel.encode() + b"\0" + sha256_file(path).encode() + b"\n")
    return digest.hexdigest()


def freeze(
    conditions: list[scenario.Scenario], *, size: int, repetitions: int, limits: dict[str, Any]
) -> dict[str, Any]:
    """Everything that defines the judgement, hashed before the candidate runs."""
    files = {rel: sha256_file(REPO / rel) for rel in FROZEN_FILES if (REPO / rel).is_file()}
    for s in conditions:
        files[f"scenarios/candidate/{s.path.name}"] = hashlib.sha256(s.text.encode()).hexdigest()
    frozen = {
        "lab_version": __version__,
        "files": files,
        "fixture": {"generator": "shake_256 lab-fixture-v1", "size": size},
        "repetitions": repetitions,
        "limits": limits,
    }
    blob = json.dumps(frozen, sort_keys=True).encode()
    frozen["evaluation_id"] = "eval-" + hashlib.sha256(blob).hexdigest()[:16]
    return frozen


def prepare(kind: str, given: Path, workspace: Path, log: procs.CommandLog) -> Candidate:
    if not given.exists():
        raise UsageError(f"{given}: no such file or directory; give the candidate's path.")
    if kind == "binary":
        if not given.is_file():
            raise UsageError(f"{given}: --binary needs an executable file.")
        dest = workspace / "candidate-client"
        shutil.copy2(given, dest)
        dest.chmod(0o755)
        return Candidate(
            kind, given, workspace, sha256_file(given), binary=dest, build={"status": "prebuilt"}
        )
    if kind == "source-dir":
        if not (given / "Makefile").is_file():
            raise UsageError(f"{given}: --source-dir needs a directory with a Makefile.")
        shutil.copytree(given, workspace / "src", ignore=shutil.ignore_patterns(".git", "*.o"))
        return Candidate(kind, given, workspace / "src", _tree_digest(given))
    # a patch against the lab's native/ client, applied to a copy
    shutil.copytree(
        REPO / "native", workspace / "native", ignore=shutil.ignore_patterns("*.o", "backup-client")
    )
    candidate = Candidate(kind, given, workspace / "native", sha256_file(given))
    inside_native = _patch_is_native_relative(given)
    done = procs.run(
        ["patch", "--batch", "--forward", "-p1", "-i", str(given.resolve())],
        purpose="apply the candidate patch to a copy of native/",
        log=log,
        tool="patch",
        cwd=workspace / "native" if inside_native else workspace,
        stdout=workspace / "patch.log",
        stderr=workspace / "patch.err",
        timeout=60,
        accept=None,
    )
    candidate.build = {
        "patch_exit_status": done.exit_status,
        "patch_applied_in": "native/" if inside_native else "repository root",
    }
    if done.exit_status != 0:
        candidate.build["status"] = "patch-failed"
    return candidate


def _patch_is_native_relative(patch: Path) -> bool:
    """False for a repository-relative patch (``a/native/main.c``, as ``git diff`` writes
    it); True for one made inside ``native/`` (``a/main.c``). Both apply with -p1."""
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("+++ ") and "/dev/null" not in line:
            parts = line[4:].split("\t")[0].strip().split("/")
            return "native" not in parts[:2]
    return False


def build(candidate: Candidate, log: procs.CommandLog, logs_dir: Path) -> None:
    if candidate.build.get("status") in ("prebuilt", "patch-failed"):
        return
    logs_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = procs.run(
        ["make", "-C", str(candidate.workspace)],
        purpose="build the candidate client",
        log=log,
        tool="make",
        stdout=logs_dir / "build.log",
        stderr=logs_dir / "build.err",
        timeout=BUILD_TIMEOUT_S,
        accept=None,
    )
    candidate.build.update(
        {
            "exit_status": done.exit_status,
            "timed_out": done.timed_out,
            "duration_s": round(time.monotonic() - started, 3),
            "log": "candidate/build.log",
            "stderr": "candidate/build.err",
        }
    )
    binary = _find_binary(candidate.workspace)
    if done.exit_status != 0 or binary is None:
        candidate.build["status"] = "build-failed"
        if done.exit_status == 0:
            candidate.build["why"] = "make succeeded but produced no executable backup-client"
        return
    candidate.build["status"] = "built"
    candidate.binary = binary


def _find_binary(root: Path) -> Path | None:
    for name in ("backup-client", "client"):
        for path in sorted(root.rglob(name)):
            if path.is_file() and path.stat().st_mode & 0o111:
                return path
    return None


def _all_passed(scenarios: list[ScenarioResult]) -> bool:
    return bool(scenarios) and all(
        s.verdicts.get(c) is not None and s.verdicts[c].observed == "pass"
        for s in scenarios
        for c in CLAUSES
    )


def _clause_counts(scenarios: list[ScenarioResult]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {
        c: {"pass": 0, "fail": 0, "not-observed": 0} for c in CLAUSES
    }
    for s in scenarios:
        for c in CLAUSES:
            v = s.verdicts.get(c)
            if v is not None:
                counts[c][v.observed] += 1
    return counts


def client_contract(results: list[ScenarioResult]) -> dict[str, Any]:
    """Did the candidate honour client contract v1 (docs/client-contract.md) in every
    invocation: JSON event lines, a final completion event, exit status agreeing with it?"""
    violations: list[dict[str, Any]] = []
    for s in results:
        for p in s.passes:
            for inv in p.invocations:
                for problem in inv.claim.contract_violations:
                    violations.append(
                        {
                            "condition": s.name,
                            "repetition": s.repetition,
                            "pass": p.collector,
                            "invocation": inv.index,
                            "problem": problem,
                        }
                    )
    return {
        "honoured": not violations,
        "violations": violations[:50],
        "violation_count": len(violations),
    }


def instrument_check(results: list[ScenarioResult]) -> dict[str, Any]:
    """Did the lab catch the seeded defects here, with these collectors?"""
    caught: dict[str, Any] = {}
    for s in results:
        want = {"false-success": ("C1", "C6"), "unexpected-egress": ("C3",)}[s.name]
        caught[s.name] = {c: s.verdicts[c].observed for c in want if c in s.verdicts}
    ok = all(v == "fail" for row in caught.values() for v in row.values()) and len(caught) == 2
    return {"scenarios": list(CALIBRATION_SCENARIOS), "caught": caught, "ok": ok}


def diagnostics(scenarios: list[ScenarioResult], size: int) -> list[dict[str, Any]]:
    """Unnecessary-work diagnostics from the traced passes (not timings)."""
    rows: list[dict[str, Any]] = []
    for s in scenarios:
        for row in s.merged_invocations():
            obs = row["observed"]
            strace = obs.get("strace", {})
            bpf = obs.get("bpftrace", {})
            read = strace.get("source_bytes_read")
            rows.append(
                {
                    "condition": s.name,
                    "repetition": s.repetition,
                    "invocation": row["index"],
                    "source_bytes_read": read,
                    "read_ratio": None if read is None else round(read / size, 3),
                    "hash_file_calls": bpf.get("hash_calls"),
                    "cpu_s_untraced": row["client"]["cpu_s"],
                    "missing": sorted(k for k in ("strace", "bpftrace") if k not in obs),
                }
            )
    return rows


def main(args: argparse.Namespace, console: Console) -> int:
    if not args.local and not identity.in_lab_image():
        return _in_image(args)

    def say(msg: str) -> None:
        console.print(msg, highlight=False)

    conditions = scenario.select(REPO / "scenarios" / "candidate", [], True)
    calibration = scenario.select(REPO / "scenarios", list(CALIBRATION_SCENARIOS), False)
    limits = {
        "invocation_timeout_s": args.timeout,
        "build_timeout_s": BUILD_TIMEOUT_S,
        "timing_runs": args.timing_runs,
    }
    given: Path = args.patch or args.source_dir or args.binary
    if not given.exists():
        raise UsageError(f"{given}: no such file or directory; give the candidate's path.")
    frozen = freeze(conditions, size=args.size, repetitions=args.repetitions, limits=limits)
    prepared: Setup = setup(args.collector, args.packets, archive=True, say=say)

    run_id = new_run_id("eval")
    run_dir = (args.out / run_id).resolve()
    run_dir.mkdir(parents=True)
    (run_dir / "evaluation.json").write_text(json.dumps(frozen, indent=2, sort_keys=True) + "\n")
    say(
        f"Evaluation {frozen['evaluation_id']} frozen before the candidate runs: "
        f"{run_dir / 'evaluation.json'}"
    )
    started_epoch = time.time()
    log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
    kind = "patch" if args.patch else "source-dir" if args.source_dir else "binary"
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
        say(f"Candidate ({kind}): {candidate.build.get('status')}")
        evaluation: dict[str, Any] = {**frozen, "candidate": candidate.describe()}
        scenario_results: list[ScenarioResult] = []
        status = candidate.build.get("status")
        if candidate.binary is None:
            evaluation["status"] = status or "build-failed"
            evaluation["status_reason"] = "the candidate could not be built; see its build log"
        else:
            shutil.copyfile(candidate.binary, cand_dir / "candidate-client")
            evaluation["status"], scenario_results = _judge(
                args, candidate.binary, prepared, run_dir, conditions, calibration, evaluation, say
            )
    result: RunResult = make_result(
        run_id=run_id,
        started=epoch_to_rfc3339(started_epoch),
        options={
            "mode": "evaluate",
            "scenarios": [s.name for s in conditions],
            "collector": args.collector,
            "packets": args.packets,
            "repetitions": args.repetitions,
            "size": args.size,
            "client_kind": "candidate",
            "timeout_s": args.timeout,
        },
        prepared=prepared,
        packets=args.packets,
        scenario_results=scenario_results,
        client=cand_dir / "candidate-client",
    )
    result.evaluation = evaluation
    archive = finish(result, run_dir, signer=prepared.signer, started_epoch=started_epoch, say=say)
    _print(evaluation, console)
    if archive is not None:
        from lab._cli import print_archive

        print_archive(archive, console)
    return 0 if evaluation["status"] == "pass" else 1


def _in_image(args: argparse.Namespace) -> int:
    """Run this very evaluation inside the lab image (built and cached by lab.container),
    with the candidate mounted read-only; the archive lands in the host's --out."""
    from lab.container import run as container
    from lab.container.engine import Context

    flag = "--patch" if args.patch else "--source-dir" if args.source_dir else "--binary"
    host: Path = (args.patch or args.source_dir or args.binary).resolve()
    if not host.exists():
        raise UsageError(f"{host}: no such file or directory; give the candidate's path.")
    inside = f"/lab/candidate/{host.name}"
    argv = [
        "evaluate", flag, inside,
        "--repetitions", str(args.repetitions),
        "--timing-runs", str(args.timing_runs),
        "--collector", args.collector,
        "--packets", args.packets,
        "--size", str(args.size),
        "--timeout", str(args.timeout),
        "--out", container.CONTAINER_ARTIFACTS,
    ]  # fmt: skip
    ctx = Context.for_repo(REPO, artifacts=args.out.resolve())
    done = container.run_lab(ctx, argv, mounts=((host, inside),))
    return int(done.exit_status or 0)


def _judge(
    args: argparse.Namespace,
    binary: Path,
    prepared: Setup,
    run_dir: Path,
    conditions: list[scenario.Scenario],
    calibration: list[scenario.Scenario],
    evaluation: dict[str, Any],
    say: Callable[[str], None],
) -> tuple[str, list[ScenarioResult]]:
    seeded = REPO / "native" / "backup-client"
    say("Checking the instrument on this machine (false-success, unexpected-egress)…")
    cal_plan = Plan(
        scenarios=calibration,
        passes=prepared.passes,
        packets=args.packets,
        size=args.size,
        client=seeded,
        timeout_s=args.timeout,
        unavailable=prepared.skipped,
        seed="calibration",
    )
    cal_results = run_plan(cal_plan, run_dir, prepared, say)
    evaluation["instrument_check"] = instrument_check(cal_results)
    if not evaluation["instrument_check"]["ok"]:
        evaluation["status_reason"] = (
            "the instrument did not catch the seeded defects on this machine with these "
            "collectors, so it refuses to judge the candidate"
        )
        return "refused", cal_results
    say(f"Judging the candidate: {len(conditions)} conditions × {args.repetitions} repetitions")
    plan = Plan(
        scenarios=conditions,
        passes=prepared.passes,
        packets=args.packets,
        repetitions=args.repetitions,
        size=args.size,
        client=binary,
        client_kind="candidate",
        timeout_s=args.timeout,
        unavailable=prepared.skipped,
        seed="candidate",
    )
    results = run_plan(plan, run_dir, prepared, say)
    counts = _clause_counts(results)
    evaluation["clauses"] = {c: {**counts[c], "total": len(results)} for c in CLAUSES}
    evaluation["client_contract"] = client_contract(results)
    evaluation["diagnostics"] = diagnostics(results, args.size)
    say(f"Untraced timing: {args.timing_runs} rounds, candidate and baseline alternated…")
    with tempfile.TemporaryDirectory(prefix="lab-timing-") as scratch:
        evaluation["timing"] = timing.alternate(
            {"baseline": seeded, "candidate": binary},
            rounds=args.timing_runs,
            size=args.size,
            workdir=Path(scratch),
            log=procs.CommandLog(run_dir / "commands.jsonl", root=run_dir),
            timeout=args.timeout,
        )
    passed = _all_passed(results)
    if not passed:
        failed = sorted(
            {
                c
                for s in results
                for c in CLAUSES
                if s.verdicts.get(c) and s.verdicts[c].observed != "pass"
            }
        )
        evaluation["status_reason"] = (
            f"clause(s) {', '.join(failed)} did not pass in every repetition"
        )
    return ("pass" if passed else "fail"), cal_results + results


def _print(evaluation: dict[str, Any], console: Console) -> None:
    console.print(
        f"Evaluation {evaluation['evaluation_id']}: [bold]{evaluation['status']}[/]"
        + (f" — {evaluation['status_reason']}" if evaluation.get("status_reason") else "")
    )
    for clause, row in evaluation.get("clauses", {}).items():
        console.print(
            f"  {clause}: {row['pass']}/{row['total']} passed"
            f" ({row['fail']} fail, {row['not-observed']} not observed)"
        )
    ratio = evaluation.get("timing", {}).get("ratio")
    if ratio:
        fb = ratio.get("first_backup_wall")
        console.print(
            f"  timing (untraced, median wall, first backup): candidate/baseline = "
            f"{'N/A' if fb is None else f'{fb:.2f}×'}"
        )
