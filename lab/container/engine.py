"""The Docker engine the lab image is built and run with: its version, installing it,
starting its daemon, and following a ``docker`` command's output as it comes.

    ctx = Context.for_repo(Path("."))
    info = ensure_engine(ctx, install=True)     # docker.io installed and dockerd running
    info.server_version
    engine_plan(EngineState(cli=True, daemon=False, answers=False, root=True, debian=True),
                install=True)                   # ("install", "start"): the decision alone

All Docker code lives in ``lab/container/``: this module (the engine), ``image.py`` (build,
inspect, cache), ``run.py`` (``docker run``), ``repro.py`` (two clean builds compared) and
``base.py`` (the base image, pulled or bootstrapped). ``tasks.py`` only calls them. How the
container gets at the host kernel, and why each capability is there, is explained in
``docs/container.md``; what is and is not reproducible in ``docs/reproducibility.md``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab.errors import ContainerError
from lab.host import procs


@dataclass(frozen=True)
class Context:
    """Where things are: the repository, its artifacts, the command log of image work."""

    root: Path
    artifacts: Path
    log: procs.CommandLog
    #: receives progress lines (build output, the container's output)
    echo: Callable[[str], None] = field(default=lambda text: print(text, end="", flush=True))

    @classmethod
    def for_repo(
        cls, root: Path, *, artifacts: Path | None = None, human_on_stderr: bool = False
    ) -> Context:
        """``human_on_stderr``: progress to stderr, for a command whose stdout is one JSON
        document (``--json``)."""
        root = root.resolve()
        arts = (artifacts or root / "artifacts").resolve()
        arts.mkdir(parents=True, exist_ok=True)
        log = procs.CommandLog(arts / ".image" / "commands.jsonl")
        if human_on_stderr:
            return cls(root=root, artifacts=arts, log=log, echo=_to_stderr)
        return cls(root=root, artifacts=arts, log=log)

    @property
    def image_dir(self) -> Path:
        return self.artifacts / ".image"


@dataclass(frozen=True)
class Engine:
    client_version: str
    server_version: str


def _to_stderr(text: str) -> None:
    print(text, end="", file=sys.stderr, flush=True)


def engine(ctx: Context) -> Engine:
    """The Docker engine's versions, or one sentence saying what is missing and the fix."""
    if procs.which("docker") is None:
        raise ContainerError(missing_engine_message(is_root=os.geteuid() == 0))
    done = procs.run(
        ["docker", "version", "--format", "{{json .}}"],
        purpose="Docker engine version",
        log=ctx.log,
        timeout=30,
        accept=None,
        capture=True,
        stderr=ctx.image_dir / "docker-version.err",
    )
    return parse_version((done.output or b"").decode(errors="replace"), done.exit_status)


def parse_version(text: str, exit_status: int | None) -> Engine:
    """``docker version --format '{{json .}}'`` output: the client always, the server only
    when the daemon answered (the command then exits 0)."""
    data: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("{"):
            data = json.loads(line)
    client = str((data.get("Client") or {}).get("Version") or "unknown")
    server = (data.get("Server") or {}).get("Version")
    if exit_status != 0 or not server:
        raise ContainerError(not_running_message(is_root=os.geteuid() == 0))
    return Engine(client_version=client, server_version=str(server))


def not_running_message(*, is_root: bool) -> str:
    """dockerd is installed but does not answer: how to start it, as this user."""
    if is_root:
        return (
            "the Docker daemon is not reachable (docker version could not reach it); start it "
            "with 'systemctl start docker' or 'dockerd --bridge=none --iptables=false &'."
        )
    return (
        "the Docker daemon is not reachable (docker version could not reach it); start it "
        "with 'sudo systemctl start docker', or run 'invoke lab.run' as root, which starts dockerd."
    )


def missing_engine_message(*, is_root: bool, debian: bool | None = None, cli: bool = False) -> str:
    """One sentence naming what to install: the whole engine, or (``cli``: the docker
    command is there) the daemon it talks to."""
    debian = _is_debian() if debian is None else debian
    what = (
        "the Docker daemon (dockerd) is not installed, only the docker command"
        if cli
        else "Docker is not installed"
    )
    if debian:
        how = "apt-get install docker.io" if is_root else "sudo apt-get install docker.io"
        also = "" if is_root else " (or run 'invoke lab.run' as root, which installs it)"
        return f"{what}; install it with '{how}'{also}."
    return (
        f"{what}; install Docker Engine (dockerd and the docker command, "
        "https://docs.docker.com/engine/install/), or run 'invoke lab.run --local' on the host."
    )


@dataclass(frozen=True, kw_only=True)
class EngineState:
    """What this machine has of a Docker engine, as :func:`engine_plan` needs it."""

    #: the docker command is on PATH
    cli: bool
    #: dockerd is on PATH
    daemon: bool
    #: ``docker version`` reached a daemon
    answers: bool
    root: bool
    debian: bool


Step = Literal["install", "start"]


def engine_plan(state: EngineState, *, install: bool) -> tuple[Step, ...]:
    """What :func:`ensure_engine` does to get an engine that answers, or the one sentence
    saying what the user must install or start where the lab may not (not root, not Debian,
    or ``install`` not asked for).

    As root on Debian with ``install``: a missing docker command *or* a missing daemon
    (a machine with the CLI only) installs docker.io, and a daemon that does not answer is
    started. Never "run as root" to a user who is root.
    """
    if state.answers:
        return ()
    allowed = install and state.root
    steps: list[Step] = []
    if not (state.cli and state.daemon):
        if not (allowed and state.debian):
            raise ContainerError(
                missing_engine_message(is_root=state.root, debian=state.debian, cli=state.cli)
            )
        steps.append("install")
    elif not allowed:
        raise ContainerError(not_running_message(is_root=state.root))
    steps.append("start")
    return tuple(steps)


def _is_debian(os_release: Path = Path("/etc/os-release")) -> bool:
    try:
        text = os_release.read_text()
    except OSError:
        return False
    return bool(re.search(r"^(ID|ID_LIKE)=.*\bdebian\b", text, re.MULTILINE))


def ensure_engine(ctx: Context, *, install: bool = False) -> Engine:
    """An engine that answers; as root on Debian, install docker.io and start the daemon
    (the decision is :func:`engine_plan`)."""
    cli = procs.which("docker") is not None
    found: Engine | None = None
    if cli:
        try:
            found = engine(ctx)
        except ContainerError:
            found = None
    state = EngineState(
        cli=cli,
        daemon=procs.which("dockerd") is not None,
        answers=found is not None,
        root=os.geteuid() == 0,
        debian=_is_debian(),
    )
    steps = engine_plan(state, install=install)
    if found is not None:
        return found
    if "install" in steps:
        install_docker_io(ctx, cli=state.cli)
        try:
            return engine(ctx)  # the package's own service may have started it
        except ContainerError:
            pass
    start_daemon(ctx)
    return engine(ctx)


def install_docker_io(ctx: Context, *, cli: bool) -> None:
    """``apt-get install docker.io``: the daemon, and the docker command if it was missing."""
    what = "the Docker daemon is not installed" if cli else "Docker is not installed"
    ctx.echo(f"{what[0].upper()}{what[1:]}: installing the Debian package docker.io.\n")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "docker.io"]):
        procs.run(
            argv,
            purpose="install docker.io",
            log=ctx.log,
            env=env,
            timeout=1200,
            stdout=ctx.image_dir / "apt.log",
            stderr=ctx.image_dir / "apt.err",
        )


def start_daemon(ctx: Context, *, timeout_s: float = 60.0) -> None:
    """Start dockerd detached (it outlives the lab): host networking only, no iptables rules.

    ``--bridge=none --iptables=false``: the lab's containers use the host network, so the
    daemon needs no bridge and changes no firewall rule on a shared machine.
    """
    ctx.echo("The Docker daemon is not running: starting dockerd.\n")
    procs.run(
        ["setsid", "-f", "dockerd", "--bridge=none", "--iptables=false"],
        purpose="start the Docker daemon",
        log=ctx.log,
        tool="dockerd",
        stderr=ctx.image_dir / "dockerd.log",
        timeout=30,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = procs.run(
            ["docker", "info"], purpose="wait for the Docker daemon", timeout=10, accept=None
        )
        if done.exit_status == 0:
            return
        time.sleep(1.0)
    raise ContainerError(
        f"dockerd did not answer within {timeout_s:g} s; see {ctx.image_dir / 'dockerd.log'}."
    )


def follow(
    ctx: Context,
    argv: Sequence[str],
    *,
    purpose: str,
    out: Path,
    rewrite: Callable[[str], str] = lambda s: s,
    grace_s: float = 30.0,
    live: Literal["stdout", "stderr"] = "stdout",
) -> procs.Completed:
    """Run ``argv``, keeping its output in ``out`` (stderr beside it, ``.err``) and echoing
    it as it comes. ``live="stderr"`` echoes the error stream as it comes and never stdout:
    for a command whose stdout is one document (``--json``) that the caller reads from
    ``out`` afterwards."""
    out.parent.mkdir(parents=True, exist_ok=True)
    err = out.with_suffix(".err")
    shown = out if live == "stdout" else err
    with procs.Background(
        argv,
        purpose=purpose,
        log=ctx.log,
        stdout=out,
        stderr=out.with_suffix(".err"),
        grace_s=grace_s,
    ) as bg:
        offset = 0
        while True:
            alive = bg.alive()
            offset = _echo_new(ctx, shown, offset, rewrite)
            if not alive:
                break
            time.sleep(0.2)
    _echo_new(ctx, shown, offset, rewrite)
    if live == "stdout" and err.exists() and err.stat().st_size:
        ctx.echo(rewrite(err.read_text(errors="replace")))
    assert bg.result is not None
    return bg.result


def _echo_new(ctx: Context, path: Path, offset: int, rewrite: Callable[[str], str]) -> int:
    if not path.exists():
        return offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    # Only whole lines, so a rewrite never sees half a path.
    cut = data.rfind(b"\n") + 1
    if cut:
        ctx.echo(rewrite(data[:cut].decode(errors="replace")))
    return offset + cut


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """An identity or report record under ``artifacts/``: sorted keys, one trailing newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
