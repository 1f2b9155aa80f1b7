"""The lab image and the container the lab runs in: Docker engine, build, ``docker run``.

All Docker code lives here (the base image, pulled or bootstrapped, is in
``lab/container/base.py``). ``tasks.py`` only calls these functions.

    ctx = Context.for_repo(Path("."))
    ensure_engine(ctx, install=True)            # docker.io installed and dockerd running
    identity = ensure_image(ctx)                # built once per set of inputs, then cached
    options = RunOptions(artifacts=ctx.artifacts)
    done = run_in_container(ctx, identity, ["python", "-m", "lab", "doctor"], options)

How the container gets at the host kernel, and why each capability is there, is explained
in ``docs/container.md``; what is and is not reproducible in ``docs/reproducibility.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.container.base import DEFAULT_BASE_IMAGE, BaseImage, render_sources, resolve_base
from lab.errors import ContainerError
from lab.host import capabilities, procs

IMAGE = "execution-evidence-lab:local"
#: label holding the digest of every file the image is built from (the build cache key)
INPUTS_LABEL = "dev.execution-evidence-lab.inputs"
#: where the repository's artifacts directory appears inside the container
CONTAINER_ARTIFACTS = "/lab/artifacts"
#: the per-run identity file the lab's provenance reads (``LAB_IMAGE_IDENTITY``)
CONTAINER_IDENTITY = f"{CONTAINER_ARTIFACTS}/.container.json"
CONTAINER_KEY = "/run/lab/signing.key"
SOURCE_URL = "https://github.com/execution-evidence-lab/execution-evidence-lab"

#: The default capability set, each one needed by a collector (docs/container.md says why).
COLLECTOR_CAPABILITIES: tuple[str, ...] = (
    "SYS_ADMIN",  # bpftrace: load and attach BPF programs; perf: kernel samples
    "BPF",  # bpftrace: BPF programs and maps (engines that know CAP_BPF)
    "PERFMON",  # bpftrace/perf: perf events (engines that know CAP_PERFMON)
    "NET_RAW",  # tcpdump: a packet socket on loopback
    "SETUID",  # tcpdump: drops to its own user once the capture is open
    "SETGID",  # tcpdump: same, for its groups
    "KILL",  # stop tcpdump, which then runs as another user
    "DAC_OVERRIDE",  # write into the invoking user's artifacts directory
    "CHOWN",  # hand the files written under artifacts/ back to the invoking user
)
#: capabilities that Docker Engine before 20.10.?? / runc without them reject by name
NEWER_CAPABILITIES = ("BPF", "PERFMON")

#: host paths the collectors read, mounted at the same place when the host has them
KERNEL_MOUNTS: tuple[tuple[str, bool], ...] = (
    ("/sys/kernel/tracing", False),  # tracefs: uprobe/kprobe events, tracepoint formats
    ("/sys/kernel/debug", False),  # debugfs: older kernels keep tracefs under it
    ("/lib/modules", True),  # kernel headers/modules for bpftrace on kernels without BTF
    ("/sys/kernel/btf", True),  # BTF: bpftrace's kernel type information
)

#: the files the image is built from (the build context allow-list in .dockerignore)
BUILD_INPUTS = ("Dockerfile", "docker", "native", "lab", "scenarios", "probes", "pyproject.toml")
_SKIP_INPUT = re.compile(r"(__pycache__|\.pyc$|\.o$|^native/backup-client$|^docker/wheels/)")

#: the platforms ``pip download`` may pick wheels for: Debian 12 has glibc 2.36, and pip 23
#: does not expand one manylinux tag into the older ones it implies
WHEEL_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
)


@dataclass(frozen=True)
class Context:
    """Where things are: the repository, its artifacts, the command log of image work."""

    root: Path
    artifacts: Path
    log: procs.CommandLog
    #: receives progress lines (build output, the container's output)
    echo: Callable[[str], None] = field(default=lambda text: print(text, end="", flush=True))

    @classmethod
    def for_repo(cls, root: Path, *, artifacts: Path | None = None) -> Context:
        root = root.resolve()
        arts = (artifacts or root / "artifacts").resolve()
        arts.mkdir(parents=True, exist_ok=True)
        return cls(
            root=root, artifacts=arts, log=procs.CommandLog(arts / ".image" / "commands.jsonl")
        )

    @property
    def image_dir(self) -> Path:
        return self.artifacts / ".image"


# --- the engine ------------------------------------------------------------------------


@dataclass(frozen=True)
class Engine:
    client_version: str
    server_version: str


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
        raise ContainerError(
            "the Docker daemon is not reachable (docker version could not reach it); start it "
            "with 'sudo systemctl start docker', or as root 'dockerd --bridge=none "
            "--iptables=false &', or run 'invoke lab.run' as root to start it."
        )
    return Engine(client_version=client, server_version=str(server))


def missing_engine_message(*, is_root: bool, debian: bool | None = None) -> str:
    debian = _is_debian() if debian is None else debian
    if debian:
        how = "apt-get install docker.io" if is_root else "sudo apt-get install docker.io"
        return (
            f"Docker is not installed; install it with '{how}' (or run 'invoke lab.run' as root)."
        )
    return (
        "Docker is not installed; install Docker Engine (the docker CLI and dockerd, "
        "https://docs.docker.com/engine/install/), or run 'invoke lab.run --local' on the host."
    )


def _is_debian(os_release: Path = Path("/etc/os-release")) -> bool:
    try:
        text = os_release.read_text()
    except OSError:
        return False
    return bool(re.search(r"^(ID|ID_LIKE)=.*\bdebian\b", text, re.MULTILINE))


def ensure_engine(ctx: Context, *, install: bool = False) -> Engine:
    """An engine that answers; as root on Debian, install docker.io and start the daemon."""
    is_root = os.geteuid() == 0
    if procs.which("docker") is None:
        if not (install and is_root and _is_debian()):
            raise ContainerError(missing_engine_message(is_root=is_root))
        ctx.echo("Docker is not installed: installing the Debian package docker.io.\n")
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
    try:
        return engine(ctx)
    except ContainerError:
        if not (install and is_root and procs.which("dockerd")):
            raise
    start_daemon(ctx)
    return engine(ctx)


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


# --- the image -------------------------------------------------------------------------


def inputs_digest(root: Path) -> str:
    """SHA-256 over the path and content of every file the image is built from."""
    digest = hashlib.sha256()
    for rel, path in sorted(_input_files(root)):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _input_files(root: Path) -> Iterable[tuple[str, Path]]:
    for name in BUILD_INPUTS:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in paths:
            rel = path.relative_to(root).as_posix()
            if not _SKIP_INPUT.search(rel):
                yield rel, path


def source_date_epoch(ctx: Context) -> int:
    """The commit's time (the reproducible-builds convention), or the environment's."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").strip().isdigit():
        return int(os.environ["SOURCE_DATE_EPOCH"])
    value = _git(ctx, "log", "-1", "--format=%ct")
    return int(value) if value and value.isdigit() else 0


def git_revision(ctx: Context) -> str | None:
    return _git(ctx, "rev-parse", "HEAD")


def _git(ctx: Context, *args: str) -> str | None:
    if procs.which("git") is None or not (ctx.root / ".git").exists():
        return None
    done = procs.run(
        ["git", "-C", str(ctx.root), *args],
        purpose="git identity",
        log=ctx.log,
        timeout=30,
        accept=None,
        capture=True,
    )
    text = (done.output or b"").decode().strip()
    return text if done.exit_status == 0 and text else None


def rfc3339(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def fetch_wheels(ctx: Context) -> Path:
    """Download the wheels pinned in docker/requirements.lock (hashes checked) for the build.

    The build then installs them with no package index at all, so the image build reaches
    only the Debian archive, and a host's own pip settings (proxy, CA bundle) apply here.
    """
    lock = ctx.root / "docker" / "requirements.lock"
    dest = ctx.root / "docker" / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    argv = [
        *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"),
        *("--require-hashes", "--python-version", "3.11", "--implementation", "cp"),
        *("--abi", "cp311", "--dest", str(dest), "-r", str(lock)),
    ]
    for tag in WHEEL_PLATFORMS:
        argv += ["--platform", tag]
    procs.run(
        argv,
        purpose="fetch the locked wheels",
        log=ctx.log,
        timeout=900,
        stderr=ctx.image_dir / "pip-download.err",
    )
    return dest


def build_args(ctx: Context, base: BaseImage) -> dict[str, str]:
    epoch = source_date_epoch(ctx)
    return {
        "BASE_IMAGE": base.reference,
        "SOURCE_DATE_EPOCH": str(epoch),
        "LAB_SOURCE": SOURCE_URL,
        "LAB_REVISION": git_revision(ctx) or "unknown",
        "LAB_CREATED": rfc3339(epoch),
        "LAB_BASE_PROVENANCE": json.dumps(base.as_dict(), sort_keys=True),
    }


def build_argv(
    tag: str, args: Mapping[str, str], labels: Mapping[str, str], *, no_cache: bool, context: Path
) -> list[str]:
    argv = ["docker", "build", "--network", "host", "--tag", tag]
    if no_cache:
        argv.append("--no-cache")
    for key in sorted(args):
        argv += ["--build-arg", f"{key}={args[key]}"]
    for key in sorted(labels):
        argv += ["--label", f"{key}={labels[key]}"]
    return [*argv, str(context)]


def build_image(
    ctx: Context,
    *,
    tag: str = IMAGE,
    base_image: str = DEFAULT_BASE_IMAGE,
    no_cache: bool = False,
    base: BaseImage | None = None,
    record: bool = True,
) -> dict[str, Any]:
    """Build the image; return its identity (written to ``artifacts/.image.json`` when
    ``record``)."""
    render_sources(ctx.root)
    base = base or resolve_base(base_image, workdir=Path("/var/tmp/lab-base"), log=ctx.log)
    fetch_wheels(ctx)
    digest = inputs_digest(ctx.root)
    argv = build_argv(
        tag, build_args(ctx, base), {INPUTS_LABEL: digest}, no_cache=no_cache, context=ctx.root
    )
    started = time.monotonic()
    done = follow(ctx, argv, purpose="build the lab image", out=ctx.image_dir / "build.log")
    if done.exit_status != 0:
        raise ContainerError(build_failure(ctx.image_dir / "build.log"))
    identity = _identity(ctx, tag, base, digest)
    identity["build_seconds"] = round(time.monotonic() - started, 1)
    if record:
        _write_json(ctx.artifacts / ".image.json", identity)
    return identity


def build_failure(log: Path) -> str:
    """One sentence for a failed build; the lock's own sentence when the lock is stale."""
    text = log.read_text(errors="replace") if log.exists() else ""
    for line in text.splitlines():
        if "no longer serves" in line:
            return line.strip()
    return f"docker build failed; the last lines of {log} say why."


def _identity(ctx: Context, tag: str, base: BaseImage, inputs: str) -> dict[str, Any]:
    info = inspect_image(ctx, tag)
    if info is None:
        raise ContainerError(f"the image {tag} is not present after its build; rebuild it.")
    labels = (info.get("Config") or {}).get("Labels") or {}
    manifest = image_manifest(ctx, tag)
    return {
        "name": tag,
        "id": info.get("Id"),
        "digest": info.get("Id"),
        "size_bytes": info.get("Size"),
        "inputs_sha256": inputs,
        "revision": labels.get("org.opencontainers.image.revision"),
        "created": labels.get("org.opencontainers.image.created"),
        "base": base.as_dict(),
        "client_sha256": manifest.get("client_sha256"),
        "packages_sha256": manifest.get("packages_sha256"),
    }


def inspect_image(ctx: Context, tag: str) -> dict[str, Any] | None:
    done = procs.run(
        ["docker", "image", "inspect", tag],
        purpose="inspect the lab image",
        log=ctx.log,
        timeout=60,
        accept=None,
        capture=True,
    )
    if done.exit_status != 0:
        return None
    rows: list[dict[str, Any]] = json.loads(done.output or b"[]")
    return rows[0] if rows else None


def image_manifest(ctx: Context, tag: str) -> dict[str, str]:
    """The client digest and the package manifest recorded inside the image."""
    out = ctx.image_dir / "manifest.txt"
    procs.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "cat",
            tag,
            "/usr/share/lab/manifest/client.sha256",
            "/usr/share/lab/manifest/packages.txt",
        ],
        purpose="read the image manifest",
        log=ctx.log,
        stdout=out,
        timeout=120,
    )
    lines = out.read_text().splitlines()
    client = lines[0].split()[0] if lines else ""
    packages = "\n".join(lines[1:]) + "\n"
    return {
        "client_sha256": client,
        "packages_sha256": hashlib.sha256(packages.encode()).hexdigest(),
        "packages": packages,
    }


def ensure_image(
    ctx: Context, *, tag: str = IMAGE, rebuild: bool = False, base_image: str = DEFAULT_BASE_IMAGE
) -> dict[str, Any]:
    """The image for the current inputs: reused when its inputs label matches, else built."""
    if not rebuild:
        info = inspect_image(ctx, tag)
        labels = ((info or {}).get("Config") or {}).get("Labels") or {}
        recorded = image_identity(ctx.artifacts)
        render_sources(ctx.root)
        current = inputs_digest(ctx.root)
        if (
            info is not None
            and labels.get(INPUTS_LABEL) == current
            and recorded is not None
            and recorded.get("id") == info.get("Id")
        ):
            return recorded
    return build_image(ctx, tag=tag, base_image=base_image)


def image_identity(artifacts: Path) -> dict[str, Any] | None:
    """What ``artifacts/.image.json`` records about the last image built, or None."""
    path = artifacts / ".image.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


# --- running in the container ----------------------------------------------------------


@dataclass(frozen=True)
class RunOptions:
    artifacts: Path
    privileged: bool = False
    capabilities: tuple[str, ...] = COLLECTOR_CAPABILITIES
    #: extra read-only mounts (host path, container path)
    mounts: tuple[tuple[Path, str], ...] = ()
    #: variables passed by name only: docker copies their value from its own environment,
    #: so a secret never appears on a command line or in commands.jsonl
    pass_env: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    interactive: bool = False


def kernel_mounts(exists: Callable[[str], bool] = os.path.exists) -> list[str]:
    argv: list[str] = []
    for path, read_only in KERNEL_MOUNTS:
        if exists(path):
            argv += ["-v", f"{path}:{path}{':ro' if read_only else ''}"]
    return argv


def run_argv(
    image: str,
    command: Sequence[str],
    options: RunOptions,
    exists: Callable[[str], bool] = os.path.exists,
) -> list[str]:
    """The ``docker run`` argument list (a pure function: tests read it directly).

    ``--pid host``: bpftrace 0.17 compares ``pid`` (a host PID) with ``cpid``; in a private
    PID namespace those never match and every filtered probe silently counts nothing.
    """
    argv = ["docker", "run", "--rm", "--init", "--pid", "host", "--network", "host"]
    if options.interactive:
        argv += ["--interactive", "--tty"]
    if options.privileged:
        argv.append("--privileged")
    else:
        argv += ["--cap-drop", "ALL"]
        for cap in options.capabilities:
            argv += ["--cap-add", cap]
        argv += ["--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined"]
    argv += kernel_mounts(exists)
    argv += ["-v", f"{options.artifacts}:{CONTAINER_ARTIFACTS}"]
    for host, inside in options.mounts:
        argv += ["-v", f"{host}:{inside}:ro"]
    for name in options.pass_env:
        argv += ["-e", name]
    for key in sorted(options.env):
        argv += ["-e", f"{key}={options.env[key]}"]
    return [*argv, image, *command]


def privilege_refusal(stderr: str) -> str | None:
    """One sentence when the engine refused the privileges asked for, else None."""
    lowered = stderr.lower()
    if "unable to apply caps" in lowered or (
        "operation not permitted" in lowered and "cap" in lowered
    ):
        return (
            "the container engine refused the requested privileges (the host's capability "
            "bounding set lacks some of them, as in a nested or rootless container); run "
            "without --privileged, or on a host where the engine runs with full capabilities."
        )
    if "unknown capability" in stderr:
        return "the container engine does not know a requested capability; drop it from the set."
    return None


def decode_capabilities(mask: str) -> list[str]:
    """Capability names in a /proc/<pid>/status mask such as ``00000000a80425fb``, spelled
    as ``--cap-add`` takes them (``SYS_ADMIN``)."""
    return capabilities.decode_capabilities(mask, prefix=False)


def probe_container(
    ctx: Context, image: str, options: RunOptions
) -> tuple[RunOptions, dict[str, Any]]:
    """Start the container once with ``options`` and read the capabilities it really holds.

    An engine that rejects CAP_BPF/CAP_PERFMON by name gets the set without them (SYS_ADMIN
    covers both on such engines). Returns the options that work and what the container held.
    """
    # The probe reads one line: never with a terminal, whatever the real run asks for.
    attempt = dataclasses.replace(options, interactive=False)
    for _ in range(2):
        err = ctx.image_dir / "probe.err"
        done = procs.run(
            run_argv(image, ["printenv", "LAB_CONTAINER_CAP_EFF"], attempt),
            purpose="read the container's capabilities",
            log=ctx.log,
            timeout=120,
            accept=None,
            capture=True,
            stderr=err,
        )
        stderr = err.read_text(errors="replace") if err.exists() else ""
        if done.exit_status == 0:
            mask = (done.output or b"").decode().strip()
            held = {
                "privileged": attempt.privileged,
                "requested": [] if attempt.privileged else list(attempt.capabilities),
                "cap_eff": mask,
                "capabilities": decode_capabilities(mask),
                "dropped_unknown": sorted(set(options.capabilities) - set(attempt.capabilities)),
            }
            return dataclasses.replace(attempt, interactive=options.interactive), held
        if "unknown capability" in stderr and not attempt.privileged:
            kept = tuple(c for c in attempt.capabilities if c not in NEWER_CAPABILITIES)
            if kept != attempt.capabilities:
                attempt = dataclasses.replace(attempt, capabilities=kept)
                continue
        refusal = privilege_refusal(stderr)
        raise ContainerError(refusal or f"the lab container did not start: {stderr.strip()[-300:]}")
    raise ContainerError("the lab container did not start with any capability set tried.")


def signing_key_options(
    env: Mapping[str, str],
) -> tuple[tuple[tuple[Path, str], ...], tuple[str, ...], dict[str, str]]:
    """How LAB_SIGNING_KEY reaches the container: a key file is mounted read-only, key text
    is passed by name. Never written into the image."""
    value = env.get("LAB_SIGNING_KEY", "").strip()
    if not value:
        return (), (), {}
    path = Path(value).expanduser()
    if "\n" not in value and path.is_file():
        return ((path.resolve(), CONTAINER_KEY),), (), {"LAB_SIGNING_KEY": CONTAINER_KEY}
    return (), ("LAB_SIGNING_KEY",), {}


def container_options(
    ctx: Context,
    *,
    privileged: bool = False,
    mounts: Sequence[tuple[Path, str]] = (),
    interactive: bool = False,
) -> RunOptions:
    key_mounts, pass_env, key_env = signing_key_options(os.environ)
    env = {"LAB_IMAGE_IDENTITY": CONTAINER_IDENTITY, **key_env}
    commit = git_revision(ctx)
    if commit:
        env["LAB_GIT_COMMIT"] = commit
    if os.environ.get("SOURCE_DATE_EPOCH"):
        env["SOURCE_DATE_EPOCH"] = os.environ["SOURCE_DATE_EPOCH"]
    return RunOptions(
        artifacts=ctx.artifacts,
        privileged=privileged,
        mounts=(*key_mounts, *mounts),
        pass_env=pass_env,
        env=env,
        interactive=interactive,
    )


def prepare(
    ctx: Context, identity: Mapping[str, Any], options: RunOptions, engine_info: Engine
) -> RunOptions:
    """Probe the container and write ``artifacts/.container.json`` for the run's provenance."""
    image = str(identity["name"])
    options, held = probe_container(ctx, image, options)
    record = dict(identity)
    record["container"] = {
        **held,
        "engine": {"client": engine_info.client_version, "server": engine_info.server_version},
        "pid_namespace": "host",
        "network": "host",
        "kernel_mounts": [p for p, _ in KERNEL_MOUNTS if os.path.exists(p)],
    }
    _write_json(ctx.artifacts / ".container.json", record)
    return options


def follow(
    ctx: Context,
    argv: Sequence[str],
    *,
    purpose: str,
    out: Path,
    rewrite: Callable[[str], str] = lambda s: s,
    grace_s: float = 30.0,
) -> procs.Completed:
    """Run ``argv``, keeping its output in ``out`` and echoing it as it comes."""
    out.parent.mkdir(parents=True, exist_ok=True)
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
            offset = _echo_new(ctx, out, offset, rewrite)
            offset = max(offset, 0)
            if not alive:
                break
            time.sleep(0.2)
    _echo_new(ctx, out, offset, rewrite)
    err = out.with_suffix(".err")
    if err.exists() and err.stat().st_size:
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


def host_paths(ctx: Context) -> Callable[[str], str]:
    """Rewrite container paths in the lab's output to where they are on the host."""
    try:
        host = os.path.relpath(ctx.artifacts)
    except ValueError:
        host = str(ctx.artifacts)
    return lambda text: text.replace(CONTAINER_ARTIFACTS, host)


def run_in_container(
    ctx: Context, identity: Mapping[str, Any], command: Sequence[str], options: RunOptions
) -> procs.Completed:
    """Run ``command`` in the lab image, then give the artifacts back to the invoking user."""
    argv = run_argv(str(identity["name"]), command, options)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        done = follow(
            ctx,
            argv,
            purpose="run the lab in its container",
            out=ctx.image_dir / f"run-{stamp}.log",
            rewrite=host_paths(ctx),
        )
    finally:
        restore_ownership(ctx, identity)
    return done


def artifacts_owner(ctx: Context, env: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """Who the artifacts belong to: the sudo caller, else the repository's owner."""
    if env.get("SUDO_UID", "").isdigit():
        return int(env["SUDO_UID"]), int(env.get("SUDO_GID", env["SUDO_UID"]))
    st = ctx.root.stat()
    return st.st_uid, st.st_gid


def restore_ownership(ctx: Context, identity: Mapping[str, Any]) -> None:
    """Files the container wrote as root go back to the invoking user."""
    uid, gid = artifacts_owner(ctx)
    if os.geteuid() == 0:
        if uid == 0:
            return
        for dirpath, dirnames, filenames in os.walk(ctx.artifacts):
            for name in [*dirnames, *filenames]:
                os.lchown(os.path.join(dirpath, name), uid, gid)
        os.lchown(ctx.artifacts, uid, gid)
        return
    # Not root here: a minimal container (CHOWN, DAC_READ_SEARCH only) does it.
    procs.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CHOWN",
            "--cap-add",
            "DAC_READ_SEARCH",
            "--entrypoint",
            "chown",
            "-v",
            f"{ctx.artifacts}:{CONTAINER_ARTIFACTS}",
            str(identity["name"]),
            "-R",
            f"{uid}:{gid}",
            CONTAINER_ARTIFACTS,
        ],
        purpose="hand the artifacts back to their owner",
        log=ctx.log,
        timeout=300,
    )


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


# --- reproducibility -------------------------------------------------------------------


def reproduce(ctx: Context, *, builds: int = 2) -> dict[str, Any]:
    """Build the image ``builds`` times from a clean cache and compare what must match.

    The client binary's SHA-256 and the installed-package manifest must be identical; image
    digests are reported either way, with the layers that differ (the classic builder keeps
    build-time file dates in every layer it writes, so those layers differ). Writes
    ``artifacts/.image/repro.json``.
    """
    base = resolve_base(DEFAULT_BASE_IMAGE, workdir=Path("/var/tmp/lab-base"), log=ctx.log)
    results: list[dict[str, Any]] = []
    for index in range(1, builds + 1):
        tag = f"execution-evidence-lab:repro-{index}"
        identity = build_image(ctx, tag=tag, no_cache=True, base=base, record=False)
        info = inspect_image(ctx, tag) or {}
        identity["layers"] = list((info.get("RootFS") or {}).get("Layers") or [])
        results.append(identity)
    first = results[0]
    same = {
        key: all(r[key] == first[key] for r in results)
        for key in ("client_sha256", "packages_sha256", "id")
    }
    differing = sorted(
        {
            i
            for r in results[1:]
            for i, layer in enumerate(r["layers"])
            if i >= len(first["layers"]) or layer != first["layers"][i]
        }
    )
    report = {
        "base": base.as_dict(),
        "builds": [
            {
                k: r[k]
                for k in (
                    "name",
                    "id",
                    "client_sha256",
                    "packages_sha256",
                    "build_seconds",
                    "size_bytes",
                )
            }
            for r in results
        ],
        "client_identical": same["client_sha256"],
        "packages_identical": same["packages_sha256"],
        "image_identical": same["id"],
        "layers": len(first["layers"]),
        "differing_layers": differing,
    }
    _write_json(ctx.image_dir / "repro.json", report)
    # The comparison is recorded; the extra images (about 1 GB each) are not kept.
    procs.run(
        ["docker", "image", "rm", *(r["name"] for r in results)],
        purpose="remove the reproduction images",
        log=ctx.log,
        timeout=300,
        accept=None,
    )
    if not (same["client_sha256"] and same["packages_sha256"]):
        raise ContainerError(
            "two clean builds differ in the client binary or the package manifest; see "
            f"{ctx.image_dir / 'repro.json'}."
        )
    return report


# --- the whole run ---------------------------------------------------------------------


LAB_EXIT_STATUSES = (0, 1, 2, 3, 130)


def lab_command(args: Sequence[str]) -> list[str]:
    return ["python", "-m", "lab", *args]


def run_lab(
    ctx: Context,
    args: Sequence[str],
    *,
    privileged: bool = False,
    mounts: Sequence[tuple[Path, str]] = (),
    install: bool = True,
    rebuild: bool = False,
) -> procs.Completed:
    """Engine, image (cached), probe, ``python -m lab ARGS`` inside: the ``lab.*`` tasks."""
    info = ensure_engine(ctx, install=install)
    identity = ensure_image(ctx, rebuild=rebuild)
    options = container_options(ctx, privileged=privileged, mounts=mounts)
    options = prepare(ctx, identity, options, info)
    done = run_in_container(ctx, identity, lab_command(args), options)
    # The lab's own statuses pass through (1: an observation disagreed or a candidate
    # failed; 2: usage; 3: schema; 130: interrupted): it has already said its sentence.
    if done.exit_status not in LAB_EXIT_STATUSES:
        raise ContainerError(
            f"'python -m lab {' '.join(args[:1])}' in the container exited with status "
            f"{done.exit_status}; its output is in {ctx.image_dir}."
        )
    return done


def shell_argv(
    ctx: Context, identity: Mapping[str, Any], engine_info: Engine, *, privileged: bool = False
) -> list[str]:
    """``docker run -it … bash`` with the probed options of a real run (``lab.shell``)."""
    options = container_options(ctx, privileged=privileged, interactive=True)
    options = prepare(ctx, identity, options, engine_info)
    return run_argv(str(identity["name"]), ["bash"], options)
