"""The Go toolchain, for the safe-store oracle: the harness built against a candidate tree
and the exported API of a tree (``apidump``), both from Go sources shipped in this package
(``harness/``), with the module proxy off, no network and the caller's build cache.

    env = go_env(gocache, home)
    harness = build_harness(candidate, scratch, env=env, log=log)   # BuildResult
    api = api_of(tree, tool, env=env, out=out / "api-candidate.txt", log=log)

Nothing of the candidate runs here: ``CGO_ENABLED=0`` (no C compiler, no cgo directives)
and ``go build`` runs no code of the module it compiles. The candidate's code first runs
in the sandbox, inside the harness.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from lab.host import procs

#: the harness's module: it requires safestore and replaces it with the candidate's tree
HARNESS_MODULE = "labharness"
#: seconds a build may take (a cold build of the standard library is about 30 s here)
BUILD_TIMEOUT_S = 300.0


def go_available() -> str | None:
    """None when ``go`` is on PATH, else the sentence naming the package to install."""
    return None if procs.which("go") else procs.missing_tool("go")


def go_env(gocache: Path, home: Path) -> dict[str, str]:
    """An environment with no module proxy, no checksum database, no workspace file, no
    user configuration, the given build cache and a private GOPATH."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GOPATH": str(home / "gopath"),
        "GOCACHE": str(gocache),
        "GOENV": "off",
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOSUMDB": "off",
        "GOWORK": "off",
        "GOTOOLCHAIN": "local",
        "GO111MODULE": "on",
        "CGO_ENABLED": "0",
        "LANG": "C.UTF-8",
    }


@dataclass(frozen=True)
class BuildResult:
    """A built program, or why there is none (``log`` holds the compiler's output)."""

    binary: Path | None
    seconds: float
    log: Path
    error: str | None = None


def _sources(dest: Path, *parts: str) -> None:
    here = resources.files("lab.workloads.safestore").joinpath("harness", *parts)
    dest.mkdir(parents=True, exist_ok=True)
    for item in here.iterdir():
        if item.name.endswith((".go", ".in")):
            (dest / item.name).write_text(item.read_text(encoding="utf-8"), encoding="utf-8")


def _build(
    src: Path,
    binary: Path,
    env: dict[str, str],
    log_path: Path,
    purpose: str,
    log: procs.CommandLog | None,
) -> BuildResult:
    t0 = time.monotonic()
    done = procs.run(
        [procs.which("go") or "go", "build", "-trimpath", "-o", str(binary), "."],
        purpose=purpose,
        log=log,
        tool="go",
        stdout=None,  # go build writes only to stderr
        stderr=log_path,
        env=env,
        cwd=src,
        timeout=BUILD_TIMEOUT_S,
        accept=None,
    )
    seconds = time.monotonic() - t0
    if done.exit_status != 0 or not binary.exists():
        why = "timed out" if done.timed_out else f"exited with status {done.exit_status}"
        return BuildResult(None, seconds, log_path, f"go build ({purpose}) {why}")
    return BuildResult(binary, seconds, log_path)


def build_harness(
    candidate: Path,
    scratch: Path,
    *,
    env: dict[str, str],
    out: Path,
    log: procs.CommandLog | None,
) -> BuildResult:
    """The harness compiled against ``candidate`` (a module named ``safestore``)."""
    src = scratch / "harness-src"
    _sources(src)
    template = (src / "go.mod.in").read_text(encoding="utf-8")
    (src / "go.mod.in").unlink()
    (src / "go.mod").write_text(
        template.replace("__CANDIDATE__", str(candidate.resolve())), encoding="utf-8"
    )
    return _build(
        src, scratch / "harness", env, out / "harness-build.txt", "safe-store harness build", log
    )


def build_apidump(
    scratch: Path, *, env: dict[str, str], out: Path, log: procs.CommandLog | None
) -> BuildResult:
    """``apidump``: a package's exported declarations, one per line (standard library only)."""
    src = scratch / "apidump-src"
    _sources(src, "apidump")
    (src / "go.mod").write_text("module apidump\n\ngo 1.19\n", encoding="utf-8")
    return _build(
        src, scratch / "apidump", env, out / "apidump-build.txt", "safe-store API reader build", log
    )


def api_of(tree: Path, tool: Path, *, out: Path, log: procs.CommandLog | None) -> str | None:
    """``tree``'s exported API as ``apidump`` prints it (kept in ``out``), None when it
    cannot be read (the reason is in ``out``)."""
    done = procs.run(
        [str(tool), str(tree)],
        purpose=f"exported API of {tree.name}",
        log=log,
        stdout=out,
        stderr=out.with_suffix(".err"),
        timeout=60,
        accept=None,
    )
    if done.exit_status != 0:
        return None
    return out.read_text(encoding="utf-8")


def go_version(env: dict[str, str]) -> str | None:
    go = procs.which("go")
    if go is None:
        return None
    done = procs.run(
        [go, "version"], purpose="go version", env=env, capture=True, timeout=30, accept=None
    )
    return (done.output or b"").decode(errors="replace").strip() or None


def discard(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
