"""A task's verification commands, each run in the client sandbox (the dedicated user, no
capabilities, no network, its own cgroup, bounded, killed as a whole at its time-out) on a
private copy of the candidate's tree, with its output kept verbatim and parsed per test.

    runner = Verifier(sandbox, task, work=scratch, log=log)
    results = runner.warm(fixture_tree, out_dir)        # every command on the untouched fixture
    result = runner.run(task.commands["test"], tree, out_dir)
    result.passed, result.report.failed, result.timed_out

Go (``toolchain: go``): ``GOFLAGS=-mod=mod``, ``GOPROXY=off``, ``GOTOOLCHAIN=local``, no
network. The build cache is warmed once per run (the first run of every command, on the
untouched fixture, writes it), then frozen: owned by root, unwritable. Each command then gets
its own ``cp -al`` of it in the sandbox user's home: hard links to root's read-only files in
directories of its own, so a candidate reuses the warm build but can neither change a cached
object another candidate reads nor see what another candidate built.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.campaign.agent import run_agent
from lab.host import procs
from lab.sandbox import Sandbox, boxfs, cell_dirs
from lab.sandbox.jail import HOME
from lab.workloads.task import FixtureTask, VerifyCommand
from lab.workloads.testreport import TestReport, parse_go_test_json, parse_junit

GO_ENV: tuple[tuple[str, str], ...] = (
    ("GOFLAGS", "-mod=mod"),
    ("GOPROXY", "off"),
    ("GOTOOLCHAIN", "local"),
    ("GOSUMDB", "off"),
    ("GOTELEMETRY", "off"),
    ("CGO_ENABLED", "1"),  # -race needs cgo
    ("GOCACHE", f"{HOME}/gocache"),
    ("GOPATH", f"{HOME}/go"),
)


@dataclass
class CommandResult:
    id: str
    exit_status: int | None
    timed_out: bool
    wall_s: float
    sandbox_error: str | None
    report: TestReport | None
    #: files kept in the command's directory (relative to it)
    kept: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """Exit 0, within the time, and (parsed) no failed test and at least one test run."""
        if self.exit_status != 0 or self.timed_out or self.sandbox_error is not None:
            return False
        if self.report is None:
            return True
        return (
            not self.report.failed and not self.report.failed_packages and not (self.report.problem)
        )

    def why(self) -> str:
        if self.sandbox_error is not None:
            return f"the sandbox failed: {self.sandbox_error}"
        if self.timed_out:
            return "timed out (the whole cgroup was killed)"
        if self.report is not None and self.report.failed:
            shown = ", ".join(self.report.failed[:5])
            more = len(self.report.failed) - 5
            return f"failed tests: {shown}" + (f" and {more} more" if more > 0 else "")
        if self.report is not None and self.report.problem and self.exit_status == 0:
            return self.report.problem
        return f"exited {self.exit_status}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "exit_status": self.exit_status,
            "timed_out": self.timed_out,
            "wall_s": round(self.wall_s, 3),
            "sandbox_error": self.sandbox_error,
            "passed": self.passed,
            "report": None if self.report is None else self.report.to_dict(),
            "kept": list(self.kept),
        }


class Verifier:
    """Runs one task's verification commands for a run; ``work`` is a root-only directory
    of the run's scratch space (the warm cache lives there)."""

    def __init__(
        self, sandbox: Sandbox, task: FixtureTask, *, work: Path, log: procs.CommandLog | None
    ) -> None:
        self.sandbox = sandbox
        self.task = task
        self.work = work
        self.log = log
        self.warm_cache: Path | None = None
        self._count = 0

    def warm(
        self, fixture: Path, out_dir: Path, *, also: Callable[[Path], None] | None = None
    ) -> dict[str, CommandResult]:
        """Every command once on the untouched fixture (its results are the baseline), then
        ``also`` (the workload's oracle on the fixture: its own builds warm the cache too)
        with the cache, which is then frozen for every later command."""
        seed = self.work / "gocache-warming"
        seed.mkdir(mode=0o700)
        os.chown(seed, self.sandbox.user.uid, self.sandbox.user.gid)
        results = {
            cid: self.run(cmd, fixture, out_dir / cid, cache=seed)
            for cid, cmd in self.task.commands.items()
        }
        if also is not None:
            also(seed)
        frozen = self.work / "gocache"
        seed.rename(frozen)
        _freeze(frozen)
        self.warm_cache = frozen
        return results

    def private_cache(self, dest: Path) -> Path:
        """A candidate's own copy of the warm cache (hard links, its own directories)."""
        if self.warm_cache is None:
            dest.mkdir(mode=0o700)
        else:
            procs.run(
                ["cp", "-al", str(self.warm_cache), str(dest)],
                purpose="verification: a private copy of the warm Go build cache",
                log=self.log,
                tool="cp",
                timeout=120,
            )
        for path in [dest, *(p for p in dest.rglob("*") if p.is_dir() and not p.is_symlink())]:
            # the mode first, while root owns it: the lab image's root has no CAP_FOWNER
            path.chmod(0o700)
            os.chown(path, self.sandbox.user.uid, self.sandbox.user.gid)
        return dest

    def run(
        self, cmd: VerifyCommand, tree: Path, out_dir: Path, *, cache: Path | None = None
    ) -> CommandResult:
        """``cmd`` on a private copy of ``tree``; its output in ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        self._count += 1
        scratch = Path(tempfile.mkdtemp(prefix="lab-verify-", dir=self.work))
        try:
            box, home, tmp = cell_dirs(scratch, self.sandbox, bounded=False)
            copy = scratch / "tree"
            shutil.copytree(tree, copy, symlinks=True)
            for path in [copy, *copy.rglob("*")]:
                os.lchown(path, self.sandbox.user.uid, self.sandbox.user.gid)
            env: tuple[tuple[str, str], ...] = ()
            if self.task.toolchain == "go":
                env = GO_ENV
                if cache is not None:
                    cache.rename(home / "gocache")  # the warming run writes the seed itself
                else:
                    self.private_cache(home / "gocache")
            ran = run_agent(
                self.sandbox,
                list(cmd.argv),
                workspace=copy,
                box=box,
                home=home,
                tmp=tmp,
                repetition=self._count,
                budget_s=cmd.timeout_s,
                network="none",
                stdout=out_dir / "stdout",
                stderr=out_dir / "stderr",
                echo=lambda line: None,
                label=f"verify-{cmd.id}",
                env=env,
            )
            if self.task.toolchain == "go" and cache is not None:
                (home / "gocache").rename(cache)
            report = _report(cmd, out_dir / "stdout", copy)
        finally:
            boxfs.remove_tree(scratch, log=self.sandbox.log)
        kept = []
        for stream in ("stdout", "stderr"):
            if stream not in cmd.keep:
                (out_dir / stream).unlink(missing_ok=True)
            elif (out_dir / stream).exists():
                kept.append(stream)
        result = CommandResult(
            id=cmd.id,
            exit_status=ran.exit_status,
            timed_out=ran.timed_out,
            wall_s=ran.wall_s,
            sandbox_error=ran.sandbox_error,
            report=report,
            kept=tuple(kept),
        )
        return result


def _report(cmd: VerifyCommand, stdout: Path, tree: Path) -> TestReport | None:
    if cmd.parse == "go-test-json":
        return parse_go_test_json(stdout.read_bytes() if stdout.exists() else b"")
    if cmd.parse == "junit" and cmd.junit_file is not None:
        path = tree / cmd.junit_file
        if path.is_symlink() or not path.is_file():
            return TestReport(problem=f"{cmd.junit_file} was not written")
        return parse_junit(path.read_bytes()[: 16 * 1024 * 1024 + 1])
    return None


def _freeze(root: Path) -> None:
    """Root's and unwritable: what every candidate's copy hard-links."""
    for path in [root, *root.rglob("*")]:
        os.lchown(path, 0, 0)
        if path.is_symlink():
            continue
        mode = path.lstat().st_mode
        path.chmod(0o755 if stat.S_ISDIR(mode) else 0o444)
