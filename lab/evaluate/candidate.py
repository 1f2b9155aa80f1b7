"""The candidate: a patch applied to a *copy* of ``native/``, a copied source tree, or a
copied binary, built in a workspace; a failed patch or build is a result, not an error.

    candidate = prepare("patch", Path("agent.patch"), workspace, log)
    build(candidate, log, run_dir / "candidate")      # make, when there is something to build
    candidate.binary                                  # None when it could not be built
    candidate.describe()                              # what results.json records about it
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab import resources
from lab.errors import UsageError
from lab.host import procs
from lab.host.digest import sha256_file
from lab.model.evaluation import BuildRecord, CandidateKind, CandidateRecord, MakeStep, PatchStep

BUILD_TIMEOUT_S = 300.0
#: runs the build's ``make`` somewhere else (``lab campaign``: in the sandbox):
#: (argv, stdout path, stderr path, time limit) -> (exit status, timed out)
MakeRunner = Callable[[list[str], Path, Path, float], tuple[int | None, bool]]


@dataclass
class Candidate:
    kind: CandidateKind
    given: Path
    workspace: Path
    input_sha256: str
    binary: Path | None = None
    build: BuildRecord = field(default_factory=BuildRecord)

    def describe(self) -> CandidateRecord:
        """What the evaluation record says about the candidate."""
        return CandidateRecord(
            kind=self.kind,
            input_name=self.given.name,
            input_sha256=self.input_sha256,
            binary_sha256=sha256_file(self.binary) if self.binary else None,
            build=self.build,
        )


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if "/." in f"/{rel}" or rel.endswith((".o", ".pyc")):
            continue
        digest.update(rel.encode() + b"\0" + sha256_file(path).encode() + b"\n")
    return digest.hexdigest()


def input_digest(kind: CandidateKind, given: Path) -> str:
    """The candidate as given, by digest: the file's SHA-256, or a source tree's (its files'
    paths and digests, build leftovers and hidden files aside)."""
    return _tree_digest(given) if kind == "source-dir" else sha256_file(given)


def prepare(kind: CandidateKind, given: Path, workspace: Path, log: procs.CommandLog) -> Candidate:
    if not given.exists():
        raise UsageError(f"{given}: no such file or directory; give the candidate's path.")
    if kind == "binary":
        if not given.is_file():
            raise UsageError(f"{given}: --binary needs an executable file.")
        dest = workspace / "candidate-client"
        shutil.copy2(given, dest)
        dest.chmod(0o755)
        return Candidate(
            kind,
            given,
            workspace,
            input_digest(kind, given),
            binary=dest,
            build=BuildRecord(status="prebuilt"),
        )
    if kind == "source-dir":
        if not (given / "Makefile").is_file():
            raise UsageError(f"{given}: --source-dir needs a directory with a Makefile.")
        shutil.copytree(given, workspace / "src", ignore=shutil.ignore_patterns(".git", "*.o"))
        return Candidate(kind, given, workspace / "src", input_digest(kind, given))
    # a patch against the lab's native/ client, applied to a copy
    shutil.copytree(
        resources.native_dir(),
        workspace / "native",
        ignore=shutil.ignore_patterns("*.o", "backup-client"),
    )
    candidate = Candidate(kind, given, workspace / "native", input_digest(kind, given))
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
    candidate.build = BuildRecord(
        status=None if done.exit_status == 0 else "patch-failed",
        patch=PatchStep(
            exit_status=done.exit_status,
            applied_in="native/" if inside_native else "repository root",
        ),
    )
    return candidate


def _patch_is_native_relative(patch: Path) -> bool:
    """False for a repository-relative patch (``a/native/main.c``, as ``git diff`` writes
    it); True for one made inside ``native/`` (``a/main.c``). Both apply with -p1."""
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("+++ ") and "/dev/null" not in line:
            parts = line[4:].split("\t")[0].strip().split("/")
            return "native" not in parts[:2]
    return False


def build(
    candidate: Candidate,
    log: procs.CommandLog,
    logs_dir: Path,
    *,
    make_runner: MakeRunner | None = None,
) -> None:
    """``make -C`` the candidate's tree (with ``make_runner``, wherever that runs it)."""
    if candidate.build.status in ("prebuilt", "patch-failed"):
        return
    logs_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    argv = ["make", "-C", str(candidate.workspace)]
    if make_runner is not None:
        exit_status, timed_out = make_runner(
            argv, logs_dir / "build.log", logs_dir / "build.err", BUILD_TIMEOUT_S
        )
    else:
        done = procs.run(
            argv,
            purpose="build the candidate client",
            log=log,
            tool="make",
            stdout=logs_dir / "build.log",
            stderr=logs_dir / "build.err",
            timeout=BUILD_TIMEOUT_S,
            accept=None,
        )
        exit_status, timed_out = done.exit_status, done.timed_out
    make = MakeStep(
        exit_status=exit_status,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 3),
        log="candidate/build.log",
        stderr="candidate/build.err",
    )
    binary = _find_binary(candidate.workspace)
    if exit_status != 0 or binary is None:
        why = "make succeeded but produced no executable backup-client"
        candidate.build = replace(
            candidate.build,
            make=make,
            status="build-failed",
            why=why if exit_status == 0 else None,
        )
        return
    candidate.build = replace(candidate.build, make=make, status="built")
    candidate.binary = binary


def _find_binary(root: Path) -> Path | None:
    """The built executable: a regular file inside the tree (never a symbolic link, which a
    build could point at any file of this machine)."""
    for name in ("backup-client", "client"):
        for path in sorted(root.rglob(name)):
            if path.is_symlink() or not path.resolve().is_relative_to(root.resolve()):
                continue
            if path.is_file() and path.stat().st_mode & 0o111:
                return path
    return None
