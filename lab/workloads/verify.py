"""A task's verification commands, each run in the client sandbox (the dedicated user, no
capabilities, no network, its own cgroup, bounded, killed as a whole at its time-out) on a
private copy of the candidate's tree, with its output kept verbatim and parsed per test.

    runner = Verifier(sandbox, task, work=scratch, log=log)
    results = runner.warm(fixture_tree, out_dir)        # every command on the untouched fixture
    result = runner.run(task.commands["test"], tree, out_dir)
    result.passed, result.report.failed, result.timed_out

Go (``toolchain: go``): ``GOFLAGS=-mod=mod``, ``GOPROXY=off``, ``GOTOOLCHAIN=local``, no
network. The build cache is warmed once per run (the first run of every command, on the
untouched fixture, writes it into a bounded tmpfs), then copied out and frozen: root's,
read-only files. Each command then sees it at ``$HOME/gocache`` through an overlay whose
lower layer is the frozen cache (read, never written, nothing copied) and whose upper layer
is a bounded tmpfs of its own (``CACHE_MAX``): a candidate reuses the warm build but can
neither change a cached object another candidate reads nor see what another candidate built.

Every writable directory of a command is bounded (``lab.sandbox.boxfs``): its HOME and /tmp
(Go's GOTMPDIR: the linked test binaries) as a client's, ``disk_max`` each, and its build
cache's upper layer, ``CACHE_MAX``. A command that fills one gets ENOSPC and the host's disk
never sees a byte of it; what each held afterwards is recorded beside its exit status
(``CommandResult.disk``), and the bounds are part of the task's evaluation id (``limits``).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.campaign.agent import run_agent
from lab.host import procs
from lab.sandbox import Sandbox, SandboxSettings, boxfs, cell_dirs
from lab.sandbox.boxfs import DiskUse
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
#: bytes and inodes of a verification command's own writes to the build cache (the upper
#: layer over the frozen warm cache; the warming run's whole cache). The race-instrumented
#: standard library and safe-store's harness take about 50 MB here; HOME, /tmp and this
#: together (768 MiB) stay under ``memory_max`` (their pages are charged to it)
CACHE_MAX = 256 * 1024 * 1024
CACHE_INODES_MAX = 65536


def limits_under(settings: SandboxSettings) -> dict[str, Any]:
    """Every bound a verification command runs under in a sandbox of ``settings``, known
    before any sandbox is made (a campaign's shards derive their shared run id from it)."""
    return {
        **settings.to_dict(),
        "gocache_max_bytes": CACHE_MAX,
        "gocache_inodes_max": CACHE_INODES_MAX,
    }


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
    #: what its bounded directories held when it ended (home, tmp, gocache)
    disk: dict[str, DiskUse | None] = field(default_factory=dict)

    @property
    def full(self) -> tuple[str, ...]:
        """The bounded directories it filled (a write beyond the bound got ENOSPC)."""
        return tuple(name for name, use in sorted(self.disk.items()) if use and use.full)

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
        reason = self._why()
        if self.full and self.sandbox_error is None:
            reason += f" (it filled its bounded {', '.join(self.full)}: writes beyond got ENOSPC)"
        return reason

    def _why(self) -> str:
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
            "disk": {k: None if v is None else v.to_dict() for k, v in sorted(self.disk.items())},
            "disk_full": list(self.full),
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

    def limits(self) -> dict[str, Any]:
        """Every bound a verification command runs under (part of the evaluation id)."""
        return limits_under(self.sandbox.settings)

    def _bounded(self, path: Path) -> Path:
        """``path`` made (0700) and mounted as a bounded tmpfs of ``CACHE_MAX``, the client's."""
        path.mkdir(mode=0o700)
        user = self.sandbox.user
        boxfs.mount_bounded(
            path, size=CACHE_MAX, inodes=CACHE_INODES_MAX, uid=user.uid, gid=user.gid, log=self.log
        )
        return path

    def warm(
        self, fixture: Path, out_dir: Path, *, also: Callable[[Path], None] | None = None
    ) -> dict[str, CommandResult]:
        """Every command once on the untouched fixture (its results are the baseline), then
        ``also`` (the workload's oracle on the fixture: its own builds warm the cache too)
        with the cache (a bounded tmpfs), which is then copied out and frozen for every
        later command."""
        seed = self._bounded(self.work / "gocache-warming")
        try:
            results = {
                cid: self.run(cmd, fixture, out_dir / cid, cache=seed)
                for cid, cmd in self.task.commands.items()
            }
            if also is not None:
                also(seed)
            frozen = self.work / "gocache"
            procs.run(
                # not -a: the copy's owners and modes are _freeze's to set, and the lab
                # image's root (no CAP_FOWNER) cannot set the times of a file it gave away
                ["cp", "-R", "--preserve=timestamps", "--", str(seed), str(frozen)],
                purpose="verification: the warm Go build cache kept for the run",
                log=self.log,
                tool="cp",
                timeout=300,
            )
        finally:
            boxfs.remove_tree(seed, log=self.log)
        _freeze(frozen, self.sandbox.user.uid)
        self.warm_cache = frozen
        return results

    def private_cache(self, dest: Path) -> Path:
        """A private copy of the warm cache on the run's disk (hard links, its own
        directories) for the workload's oracle, which builds its harness as root outside
        the sandbox."""
        if self.warm_cache is None:
            dest.mkdir(mode=0o700)
        else:
            procs.run(
                # hard links, new directories: not -a, whose owners then times on the
                # directories the lab image's root (no CAP_FOWNER) cannot set; mode and owner
                # are set below, in that order
                ["cp", "-R", "-l", "-P", "--preserve=timestamps", str(self.warm_cache), str(dest)],
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

    def _cache_for(self, scratch: Path, home: Path, cache: Path | None) -> Path:
        """``$HOME/gocache`` of one command: the warming run's bounded cache itself, else an
        overlay of the frozen warm cache with a bounded upper layer of its own (or, with no
        warm cache, a bounded tmpfs)."""
        target = home / "gocache"
        if cache is None and self.warm_cache is None:
            return self._bounded(target)
        target.mkdir(mode=0o700)
        os.chown(target, self.sandbox.user.uid, self.sandbox.user.gid)
        if cache is not None:
            boxfs.bind(cache, target, log=self.log)
        else:
            assert self.warm_cache is not None
            rw = self._bounded(scratch / "gocache-rw")
            boxfs.mount_layered(target, lower=self.warm_cache, rw=rw, log=self.log)
        return target

    def run(
        self, cmd: VerifyCommand, tree: Path, out_dir: Path, *, cache: Path | None = None
    ) -> CommandResult:
        """``cmd`` on a private copy of ``tree``; its output in ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        self._count += 1
        scratch = Path(tempfile.mkdtemp(prefix="lab-verify-", dir=self.work))
        disk: dict[str, DiskUse | None] = {}
        try:
            box, home, tmp = cell_dirs(scratch, self.sandbox)  # bounded: boxfs
            copy = scratch / "tree"
            shutil.copytree(tree, copy, symlinks=True)
            for path in [copy, *copy.rglob("*")]:
                os.lchown(path, self.sandbox.user.uid, self.sandbox.user.gid)
            env: tuple[tuple[str, str], ...] = ()
            dirs = {"home": home, "tmp": tmp}
            if self.task.toolchain == "go":
                env = GO_ENV
                dirs["gocache"] = self._cache_for(scratch, home, cache)
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
            disk = {name: boxfs.usage(path) for name, path in dirs.items()}
            report = _report(cmd, out_dir / "stdout", copy)
        finally:
            boxfs.remove_tree(scratch, log=self.sandbox.log)
        kept = []
        for stream in ("stdout", "stderr"):
            if stream not in cmd.keep:
                (out_dir / stream).unlink(missing_ok=True)
            elif (out_dir / stream).exists():
                kept.append(stream)
        return CommandResult(
            id=cmd.id,
            exit_status=ran.exit_status,
            timed_out=ran.timed_out,
            wall_s=ran.wall_s,
            sandbox_error=ran.sandbox_error,
            report=report,
            kept=tuple(kept),
            disk=disk,
        )


def _report(cmd: VerifyCommand, stdout: Path, tree: Path) -> TestReport | None:
    if cmd.parse == "go-test-json":
        return parse_go_test_json(stdout.read_bytes() if stdout.exists() else b"")
    if cmd.parse == "junit" and cmd.junit_file is not None:
        path = tree / cmd.junit_file
        if path.is_symlink() or not path.is_file():
            return TestReport(problem=f"{cmd.junit_file} was not written")
        return parse_junit(path.read_bytes()[: 16 * 1024 * 1024 + 1])
    return None


def _freeze(root: Path, uid: int) -> None:
    """Files root's and read-only; directories the client user's (0700, so that a command
    adds entries through its overlay, into its own upper layer; the frozen directory itself
    sits in the run's root-only scratch space, which no client reaches)."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            os.lchown(path, 0, 0)
        elif stat.S_ISDIR(path.lstat().st_mode):
            path.chmod(0o700)  # the mode first, while root owns it (no CAP_FOWNER in the image)
            os.chown(path, uid, 0)
        else:
            os.chown(path, 0, 0)
            path.chmod(0o444)
