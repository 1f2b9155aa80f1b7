"""The agent's workspace: a fresh git repository holding only what the agent may read and
edit, and, once the agent is done, its patch and a restorable snapshot.

    ws = create(scratch, task_text, uid=..., gid=..., log=log)  # baseline commit made
    ... the agent works in ws.root ...
    capture = take(ws, rep_dir, log=log)                      # patch.diff, native.patch,
    capture.patch_sha256, capture.native_empty                 # final.bundle

The workspace holds ``native/`` (sources and Makefile), ``docs/protocol.md``,
``docs/client-contract.md`` and ``TASK.md``, committed with a fixed author and date, so
every repetition starts from the same commit id. The agent gets its own copy of that
repository (``.git`` in the workspace, its to change); the lab keeps a *private* git
directory outside the sandbox and never runs git on anything the agent wrote but plain
files: the final tree is copied (symbolic links kept as links, the agent's ``.git`` left
out) and diffed with the private repository, hooks and fsmonitor off and no user or system
configuration, so nothing the agent left behind runs as the lab.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab import resources
from lab.errors import CampaignError
from lab.host import procs
from lab.host.digest import sha256_file

#: what the agent may read and edit, repository-relative (``native/`` sources and Makefile)
PUBLIC_DOCS = ("docs/protocol.md", "docs/client-contract.md")
NATIVE_SUFFIXES = (".c", ".h")
#: build outputs the agent may leave behind: never part of the patch
GITIGNORE = "native/*.o\nnative/backup-client\n"
#: a workspace larger than this is not copied back (recorded instead)
MAX_WORKSPACE_BYTES = 512 * 1024 * 1024
#: the fixed identity and date of the lab's commits (the same commit id every repetition)
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Execution Evidence Lab",
    "GIT_AUTHOR_EMAIL": "lab@localhost",
    "GIT_COMMITTER_NAME": "Execution Evidence Lab",
    "GIT_COMMITTER_EMAIL": "lab@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
}
_GIT_SAFE = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]
_GIT_SAFE += ["-c", "safe.directory=*", "-c", "init.defaultBranch=main"]


@dataclass(frozen=True)
class Workspace:
    root: Path
    #: the lab's private git directory (outside the sandbox)
    gitdir: Path
    baseline_commit: str
    #: repository-relative path -> SHA-256 of every file the agent was given
    manifest: dict[str, str]


@dataclass(frozen=True)
class Capture:
    """The agent's result as files in the repetition's directory."""

    #: ``git diff --binary`` of everything against the baseline (``patch.diff``)
    patch_sha256: str
    patch_bytes: int
    #: the text diff of ``native/`` alone, what is built (``native.patch``)
    native_empty: bool
    files_changed: tuple[str, ...]
    #: changed paths outside ``native/`` (recorded, never built)
    outside_native: tuple[str, ...]
    final_commit: str | None
    #: ``final.bundle``: ``git clone final.bundle`` restores baseline and final commits
    bundle_sha256: str | None
    #: why nothing could be taken (a workspace too large, say)
    problem: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _git(
    gitdir: Path,
    tree: Path,
    args: list[str],
    log: procs.CommandLog | None,
    *,
    stdout: Path | None = None,
    capture: bool = False,
) -> str:
    """git with the lab's private directory on ``tree``; its output when ``capture``."""
    argv = ["git", *_GIT_SAFE, f"--git-dir={gitdir}", f"--work-tree={tree}", *args]
    done = procs.run(
        argv,
        purpose=f"workspace: git {args[0]}",
        log=log,
        tool="git",
        env=_GIT_ENV,
        cwd=tree,
        timeout=300,
        stdout=stdout,
        capture=capture,
    )
    out = done.output if capture else ""
    return out.decode() if isinstance(out, bytes) else str(out or "")


def given_files() -> list[str]:
    """Repository-relative files of the workspace (sorted): ``native/`` sources and
    Makefile, the public contract."""
    native = sorted(
        f"native/{p.name}"
        for p in resources.native_dir().iterdir()
        if p.is_file() and (p.suffix in NATIVE_SUFFIXES or p.name == "Makefile")
    )
    return [*native, *PUBLIC_DOCS]


def create(
    scratch: Path, task_text: str, *, uid: int, gid: int, log: procs.CommandLog | None
) -> Workspace:
    root = scratch / "workspace"
    gitdir = scratch / "lab.git"
    root.mkdir(mode=0o755)
    files = given_files()
    missing = [rel for rel in files if not resources.path(rel).is_file()]
    if missing:
        raise CampaignError(
            f"{resources.path(missing[0])} is missing, and an agent's workspace must hold it; "
            "run the campaign from a complete checkout (or a lab image built from one)."
        )
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resources.path(rel), root / rel)
    (root / "TASK.md").write_text(task_text if task_text.endswith("\n") else task_text + "\n")
    (root / ".gitignore").write_text(GITIGNORE)
    manifest = {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    procs.run(
        ["git", *_GIT_SAFE, "init", "--quiet", "--bare", str(gitdir)],
        purpose="workspace: the lab's private repository",
        log=log,
        tool="git",
        env=_GIT_ENV,
        timeout=60,
    )
    _git(gitdir, root, ["add", "-A"], log)
    _git(gitdir, root, ["commit", "--quiet", "-m", "baseline: the task as given"], log)
    commit = _git(gitdir, root, ["rev-parse", "HEAD"], log, capture=True).strip()
    # the agent's own repository: a copy of the private one, now the agent's to change
    shutil.copytree(gitdir, root / ".git")
    procs.run(
        ["git", *_GIT_SAFE, "--git-dir", str(root / ".git"), "config", "core.bare", "false"],
        purpose="workspace: the agent's repository",
        log=log,
        tool="git",
        env=_GIT_ENV,
        timeout=60,
    )
    for path in [root, *root.rglob("*")]:
        os.lchown(path, uid, gid)
    return Workspace(root=root, gitdir=gitdir, baseline_commit=commit, manifest=manifest)


def _tree_bytes(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.lstat().st_size
            if total > MAX_WORKSPACE_BYTES:
                break
    return total


def _not_plain(root: Path) -> Callable[[str, list[str]], list[str]]:
    """copytree's ``ignore``: the agent's ``.git`` at the top, and anything that is not a
    regular file, a directory or a symbolic link (a FIFO would block the copy)."""

    def ignore(directory: str, names: list[str]) -> list[str]:
        skipped = [".git"] if Path(directory) == root else []
        for name in names:
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                skipped.append(name)
        return skipped

    return ignore


def take(ws: Workspace, rep_dir: Path, *, log: procs.CommandLog | None) -> Capture:
    """``patch.diff`` (everything, binary included), ``native.patch`` (what is built),
    ``final.bundle`` (baseline and final commits) in ``rep_dir``."""
    rep_dir.mkdir(parents=True, exist_ok=True)
    if _tree_bytes(ws.root) > MAX_WORKSPACE_BYTES:
        (rep_dir / "patch.diff").write_bytes(b"")
        return Capture(
            patch_sha256=hashlib.sha256(b"").hexdigest(),
            patch_bytes=0,
            native_empty=True,
            files_changed=(),
            outside_native=(),
            final_commit=None,
            bundle_sha256=None,
            problem=f"the workspace grew over {MAX_WORKSPACE_BYTES:,} bytes; not taken",
        )
    final = ws.root.parent / "final"
    shutil.copytree(ws.root, final, symlinks=True, ignore=_not_plain(ws.root))
    _git(ws.gitdir, final, ["add", "-A"], log)
    diff_args = ["diff", "--cached", "--binary", "--full-index", ws.baseline_commit]
    _git(ws.gitdir, final, diff_args, log, stdout=rep_dir / "patch.diff")
    _git(
        ws.gitdir,
        final,
        ["diff", "--cached", ws.baseline_commit, "--", "native/"],
        log,
        stdout=rep_dir / "native.patch",
    )
    names = _git(
        ws.gitdir, final, ["diff", "--cached", "--name-only", ws.baseline_commit], log, capture=True
    ).split("\n")
    changed = tuple(sorted(n for n in names if n))
    _git(
        ws.gitdir,
        final,
        ["commit", "--quiet", "--allow-empty", "-m", "final: the agent's result"],
        log,
    )
    commit = _git(ws.gitdir, final, ["rev-parse", "HEAD"], log, capture=True).strip()
    _git(
        ws.gitdir,
        final,
        ["bundle", "create", "--quiet", str(rep_dir / "final.bundle"), "--all"],
        log,
    )
    patch = (rep_dir / "patch.diff").read_bytes()
    return Capture(
        patch_sha256=hashlib.sha256(patch).hexdigest(),
        patch_bytes=len(patch),
        native_empty=(rep_dir / "native.patch").stat().st_size == 0,
        files_changed=changed,
        outside_native=tuple(n for n in changed if not n.startswith("native/")),
        final_commit=commit,
        bundle_sha256=sha256_file(rep_dir / "final.bundle"),
    )
