"""Running the lab in its container: the ``docker run`` argument list, the capability
probe, the signing key's way in, and the whole ``python -m lab ARGS`` inside.

    done = run_lab(ctx, ["doctor"])          # engine, image (cached), probe, run: lab.* tasks
    options = RunOptions(artifacts=ctx.artifacts)
    run_argv(IMAGE, ["python", "-m", "lab", "doctor"], options)   # a pure function

``--pid host``, ``--network host`` and the explicit capability set are explained in
``docs/container.md``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab.container.engine import Context, Engine, ensure_engine, follow, write_json
from lab.container.image import ensure_image, git_revision
from lab.errors import ContainerError, UsageError
from lab.host import capabilities, procs
from lab.host.identity import builder_id, git_dirty, git_repository

#: where the repository's artifacts directory appears inside the container
CONTAINER_ARTIFACTS = "/lab/artifacts"
#: the per-run identity file the lab's provenance reads (``LAB_IMAGE_IDENTITY``)
CONTAINER_IDENTITY = f"{CONTAINER_ARTIFACTS}/.container.json"
CONTAINER_KEY = "/run/lab/signing.key"


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
    # the client sandbox (lab/sandbox/, docs/container.md "The sandbox inside the container")
    "NET_ADMIN",  # ip netns: bring loopback up in each pass's network namespace
    "SYS_CHROOT",  # bwrap: chroot into the client's new root after pivot_root
    "SETPCAP",  # capsh: drop every capability from the client's bounding set
    # strace -p at the jail's gate (not its child), and -yy: read /proc/PID/fd of lab-client
    "SYS_PTRACE",
    "SYSLOG",  # /dev/kmsg where dmesg_restrict is set: the filter's refusals (seccomp.py)
)
#: capabilities that Docker Engine before 20.10.?? / runc without them reject by name
NEWER_CAPABILITIES = ("BPF", "PERFMON")


#: host paths the collectors read, mounted at the same place when the host has them
KERNEL_MOUNTS: tuple[tuple[str, bool], ...] = (
    ("/sys/kernel/tracing", False),  # tracefs: uprobe/kprobe events, tracepoint formats
    ("/sys/kernel/debug", False),  # debugfs: older kernels keep tracefs under it
    ("/lib/modules", True),  # kernel headers/modules for bpftrace on kernels without BTF
    ("/sys/kernel/btf", True),  # BTF: bpftrace's kernel type information
    # cgroup v2, writable: one cgroup per client invocation (limits, kill, bpftrace's filter);
    # with --cgroupns host the ids bpftrace sees are the ones the lab writes
    ("/sys/fs/cgroup", False),
)


#: the kernel's log, where the sandbox's system-call filter has its refusals recorded
KMSG = "/dev/kmsg"


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
    argv += ["--cgroupns", "host"]
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
    if exists(KMSG):  # the kernel's audit records of the sandbox filter's refusals, read only
        argv += ["--device", f"{KMSG}:{KMSG}:r"]
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
    forward_env: Sequence[str] = (),
) -> RunOptions:
    """``forward_env``: names of variables passed through by name (``docker run -e NAME``:
    the value never appears on a command line), e.g. an agent's model key."""
    key_mounts, pass_env, key_env = signing_key_options(os.environ)
    pass_env = (*pass_env, *forward_env)
    env = {"LAB_IMAGE_IDENTITY": CONTAINER_IDENTITY, **key_env}
    commit = git_revision(ctx)
    if commit:
        env["LAB_GIT_COMMIT"] = commit
    dirty = git_dirty(ctx.root)
    if dirty is not None:  # the container has no .git: the host's working-tree state
        env["LAB_GIT_DIRTY"] = "1" if dirty else "0"
    repository = git_repository()  # the provenance's source URI (CI names it; else none)
    if repository:
        env["LAB_GIT_REPOSITORY"] = repository
    builder = builder_id()  # the provenance's builder.id (CI's workflow; else the local one)
    if builder:
        env["LAB_BUILDER_ID"] = builder
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
    write_json(ctx.artifacts / ".container.json", record)
    return options


def host_paths(ctx: Context) -> Callable[[str], str]:
    """Rewrite container paths in the lab's output to where they are on the host."""
    try:
        host = os.path.relpath(ctx.artifacts)
    except ValueError:
        host = str(ctx.artifacts)
    return lambda text: text.replace(CONTAINER_ARTIFACTS, host)


def run_in_container(
    ctx: Context,
    identity: Mapping[str, Any],
    command: Sequence[str],
    options: RunOptions,
    *,
    out: Path | None = None,
    live: Literal["stdout", "stderr"] = "stdout",
) -> procs.Completed:
    """Run ``command`` in the lab image, then give the artifacts back to the invoking user.
    Its output is kept in ``out`` (default ``artifacts/.image/run-<UTC>.log``)."""
    argv = run_argv(str(identity["name"]), command, options)
    if out is None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        out = ctx.image_dir / f"run-{stamp}.log"
    try:
        done = follow(
            ctx,
            argv,
            purpose="run the lab in its container",
            out=out,
            rewrite=host_paths(ctx),
            live=live,
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
    forward_env: Sequence[str] = (),
    out: Path | None = None,
    live: Literal["stdout", "stderr"] = "stdout",
) -> procs.Completed:
    """Engine, image (cached), probe, ``python -m lab ARGS`` inside: the ``lab.*`` tasks."""
    info = ensure_engine(ctx, install=install)
    identity = ensure_image(ctx, rebuild=rebuild)
    options = container_options(ctx, privileged=privileged, mounts=mounts, forward_env=forward_env)
    options = prepare(ctx, identity, options, info)
    done = run_in_container(ctx, identity, lab_command(args), options, out=out, live=live)
    # The lab's own statuses pass through (1: an observation disagreed or a candidate
    # failed; 2: usage; 3: schema; 130: interrupted): it has already said its sentence.
    if done.exit_status not in LAB_EXIT_STATUSES:
        raise ContainerError(
            f"'python -m lab {' '.join(args[:1])}' in the container exited with status "
            f"{done.exit_status}; its output is in {ctx.image_dir}."
        )
    return done


def run_lab_json(
    ctx: Context,
    args: Sequence[str],
    *,
    mounts: Sequence[tuple[Path, str]] = (),
    forward_env: Sequence[str] = (),
) -> tuple[procs.Completed, dict[str, Any] | None]:
    """:func:`run_lab` of a command given ``--json``: its stderr (the human text) echoed as
    it comes, its stdout read as the one JSON document, the container's artifact paths in
    it turned into the host's. ``None`` when the lab inside stopped before writing one (it
    has said why on stderr)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = ctx.image_dir / f"run-{stamp}.json"
    out.unlink(missing_ok=True)  # a document from an earlier run in the same second is not this one
    done = run_lab(ctx, args, mounts=mounts, forward_env=forward_env, out=out, live="stderr")
    try:
        text = out.read_text(encoding="utf-8")
        document = json.loads(text.replace(CONTAINER_ARTIFACTS, str(ctx.artifacts)))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return done, None
    return done, document if isinstance(document, dict) else None


def delegate(
    root: Path,
    args: Sequence[str],
    *,
    out: Path,
    json_document: bool,
    mounts: Sequence[tuple[Path, str]] = (),
    forward_env: Sequence[str] = (),
) -> tuple[int, dict[str, Any] | None]:
    """Hand ``python -m lab ARGS`` (an ``evaluate`` or ``campaign`` asked for outside the
    image) to the lab image, the artifacts landing in ``out``: its exit status, and with
    ``json_document`` (``ARGS`` then hold ``--json``) its document, progress on stderr."""
    if not (root / "Dockerfile").is_file():
        raise UsageError(
            f"{root} is not a checkout of the lab (no Dockerfile), so the lab image cannot be "
            "built from it; run from a checkout, or pass --local to judge on this machine."
        )
    ctx = Context.for_repo(root, artifacts=out.resolve(), human_on_stderr=json_document)
    if not json_document:
        done = run_lab(ctx, args, mounts=mounts, forward_env=forward_env)
        return int(done.exit_status or 0), None
    done, document = run_lab_json(ctx, args, mounts=mounts, forward_env=forward_env)
    return int(done.exit_status or 0), document


def shell_argv(
    ctx: Context, identity: Mapping[str, Any], engine_info: Engine, *, privileged: bool = False
) -> list[str]:
    """``docker run -it … bash`` with the probed options of a real run (``lab.shell``)."""
    options = container_options(ctx, privileged=privileged, interactive=True)
    options = prepare(ctx, identity, options, engine_info)
    return run_argv(str(identity["name"]), ["bash"], options)
