"""Judge one candidate of a fixture task: its tree prepared from the fixture (a patch
applied, or a tree given), protected files restored, then per repetition every verification
command in the sandbox and the workload's oracle, each clause decided from their evidence.

    cand = prepare(task, "patch", Path("fix.diff"), dest, log=log)   # or "tree" / "fixture"
    judged = judge(task, cand, verifier, out_dir, repetitions=1, say=print)
    judged.status, judged.clauses["S1"], judged.candidate.findings()

A verdict is never taken from the candidate's own words: a command clause passes when its
command exits 0 within its time-out (and, parsed, no test failed); an oracle clause is the
oracle's verdict; a sandbox or oracle failure is ``not-observed``, never a pass.
"""

from __future__ import annotations

import inspect
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import workloads
from lab.errors import LabError, TaskError
from lab.host import procs
from lab.host.digest import manifest_digest, sha256_file
from lab.model.task import CandidateInfo, RepetitionJudgement, TaskEvaluation, Verdict
from lab.workloads.task import FixtureTask
from lab.workloads.verify import CommandResult, Verifier

#: the workspace's own files, never part of a candidate
WORKSPACE_FILES = ("TASK.md", ".gitignore")
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
}


@dataclass(frozen=True)
class Prepared:
    #: what the commands judge: the candidate with its protected files restored
    tree: Path
    #: the candidate as given (the oracle judges its scope: a protected file changed)
    as_given: Path
    info: CandidateInfo


def manifest(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every regular file (a symbolic link: ``link:TARGET``),
    ``.git`` and the workspace's own files left out."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] == ".git" or rel in WORKSPACE_FILES:
            continue
        if path.is_symlink():
            out[rel] = "link:" + str(path.readlink())
        elif path.is_file():
            out[rel] = sha256_file(path)
    return out


def prepare(
    task: FixtureTask, kind: str, source: Path | None, dest: Path, *, log: procs.CommandLog | None
) -> Prepared:
    """The candidate's tree in ``dest/tree`` (protected files restored) and what changed."""
    tree = dest / "tree"
    shutil.copytree(task.fixture_dir, tree, symlinks=True)
    problem = None
    digest = manifest_digest(manifest(task.fixture_dir))
    if kind == "patch":
        assert source is not None
        digest = sha256_file(source)
        problem = _apply(source, tree, dest, log)
    elif kind == "tree":
        assert source is not None
        if not source.is_dir():
            raise TaskError(f"--tree {source}: not a directory; give the candidate's tree.")
        shutil.rmtree(tree)
        shutil.copytree(source, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        for name in WORKSPACE_FILES:
            (tree / name).unlink(missing_ok=True)
        digest = manifest_digest(manifest(tree))
    before, after = manifest(task.fixture_dir), manifest(tree)
    changed = tuple(
        sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    )
    protected = tuple(p for p in changed if p in task.protected)
    shutil.copytree(tree, dest / "as-given", symlinks=True)
    for rel in task.protected:
        target = tree / rel
        if target.is_symlink() or target.exists():
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.fixture_dir / rel, target)
    info = CandidateInfo(
        kind=kind,
        name="the untouched fixture" if source is None else source.name,
        sha256=digest,
        files_changed=changed,
        outside_editable=tuple(p for p in changed if p not in task.editable and p not in protected),
        protected_changed=protected,
        problem=problem,
    )
    return Prepared(tree=tree, as_given=dest / "as-given", info=info)


def _apply(patch: Path, tree: Path, dest: Path, log: procs.CommandLog | None) -> str | None:
    """``git apply`` (no repository, no configuration, paths confined to ``tree``); the
    reason it failed, or None."""
    if not patch.is_file() or patch.is_symlink():
        raise TaskError(f"--patch {patch}: not a regular file; give a unified diff.")
    argv = ["git", "apply", "--whitespace=nowarn"]
    argv += [f"--exclude={name}" for name in WORKSPACE_FILES]
    done = procs.run(
        [*argv, str(patch.resolve())],
        purpose="candidate: apply the patch to a copy of the fixture",
        log=log,
        tool="git",
        env=_GIT_ENV,
        cwd=tree,
        timeout=120,
        accept=None,
        stdout=dest / "apply.log",
        stderr=dest / "apply.err",
    )
    if done.exit_status == 0:
        return None
    err = (dest / "apply.err").read_text(errors="replace").strip().splitlines()
    return "the patch does not apply to the fixture" + (f" ({err[0][:200]})" if err else "")


def judge(
    task: FixtureTask,
    cand: Prepared,
    verifier: Verifier,
    out_dir: Path,
    *,
    repetitions: int,
    say: Callable[[str], None],
) -> TaskEvaluation:
    judged = TaskEvaluation(task=task.to_dict(), candidate=cand.info)
    if cand.info.problem is None:
        for index in range(1, repetitions + 1):
            rep_dir = out_dir / "repetitions" / f"r{index}"
            judged.repetitions.append(_repetition(task, cand, verifier, rep_dir, index))
            shown = ", ".join(
                f"{c} {v.verdict}" for c, v in sorted(judged.repetitions[-1].verdicts.items())
            )
            say(f"  {cand.info.name} r{index}: {shown}")
    judged.conclude(task.success)
    return judged


def _repetition(
    task: FixtureTask, cand: Prepared, verifier: Verifier, rep_dir: Path, index: int
) -> RepetitionJudgement:
    results = {
        cid: verifier.run(cmd, cand.tree, rep_dir / "commands" / cid)
        for cid, cmd in task.commands.items()
    }
    verdicts = {
        c.id: command_verdict(results[c.command], f"repetitions/r{index}/commands/{c.command}")
        for c in task.clauses.values()
        if c.command is not None
    }
    oracle_ids = [c.id for c in task.clauses.values() if c.oracle]
    oracle_record: dict[str, Any] | None = None
    if oracle_ids:
        oracle_record, found = run_oracle(task, cand.as_given, verifier, rep_dir / "oracle")
        for cid in oracle_ids:
            verdicts[cid] = found.get(cid) or Verdict(
                "not-observed", "the oracle gave no verdict for this clause"
            )
    return RepetitionJudgement(
        index=index,
        commands={cid: r.to_dict() for cid, r in results.items()},
        oracle=oracle_record,
        verdicts=verdicts,
    )


def command_verdict(result: CommandResult, where: str) -> Verdict:
    evidence = tuple(f"{where}/{name}" for name in result.kept)
    if result.sandbox_error is not None:
        return Verdict("not-observed", result.why(), evidence)
    if result.passed:
        return Verdict("pass", f"{result.id} exited 0", evidence)
    return Verdict("fail", f"{result.id} {result.why()}", evidence)


def run_oracle(
    task: FixtureTask, tree: Path, verifier: Verifier, out: Path, *, cache: Path | None = None
) -> tuple[dict[str, Any], dict[str, Verdict]]:
    """The workload's oracle on ``tree`` with a private copy of the warm build cache (or
    ``cache`` itself: the warming run's); an oracle that fails leaves its clauses
    ``not-observed`` with its sentence (never a pass, never a traceback)."""
    out.mkdir(parents=True, exist_ok=True)
    workload = workloads.get(task.workload)
    private = cache is None
    if cache is None:
        cache = verifier.work / f"oracle-cache-{out.parent.name}-{id(out)}"
    try:
        if private:
            verifier.private_cache(cache)
        options: dict[str, Any] = {
            "editable": task.editable,
            "protected": task.protected,
            "gocache": cache,
            "attempts": task.oracle_attempts,
            "timeout_s": task.oracle_timeout_s,
        }
        if "sandbox" in inspect.signature(workload.oracle()).parameters:
            options["sandbox"] = verifier.sandbox  # the run's own, when the oracle takes it
        judgement = workloads.judge_with(
            workload, tree, fixture=task.fixture_dir, out=out, options=options
        )
        found = {
            cid: Verdict(_verdict(r.verdict), r.reason, tuple(r.evidence))
            for cid, r in judgement.clauses.items()
        }
        return judgement.to_dict(), found
    except LabError as error:
        return {"error": str(error)}, {
            c: Verdict("not-observed", str(error)) for c in workload.oracle_clauses
        }
    except Exception as error:  # an oracle's bug must not lose the run's evidence
        why = f"the {workload.name} oracle failed: {type(error).__name__}: {error}"
        return {"error": why}, {c: Verdict("not-observed", why) for c in workload.oracle_clauses}
    finally:
        if private:
            shutil.rmtree(cache, ignore_errors=True)


def _verdict(value: str) -> Any:
    return value if value in ("pass", "fail", "not-observed") else "not-observed"
