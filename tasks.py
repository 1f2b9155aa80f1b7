"""Invoke tasks for the Execution Evidence Lab (``invoke --list``).

    invoke lab.run                 # build the pinned image (cached), run every scenario inside
                                   # it with host kernel access, write a signed archive
    invoke lab.run --local         # the same run on this host, without a container
    invoke lab.verify --archive artifacts/<run>.tar.gz --pubkey lab.pub
    invoke lab.run --shard 2/3 --run-id campaign-1      # one machine's share of a run
    invoke lab.evaluate --patch agent.patch --shard 2/3   # one machine's share of an evaluation
    invoke lab.merge --pubkey lab.pub --archive 'shards/*.tar.gz'   # verify and merge them
    invoke lab.campaign --agent-cmd "sh my-agent.sh" --repetitions 3   # an agent, judged 3×
    invoke keys.generate --out keys
    invoke image.lock              # re-pin the Debian packages and Python wheels

Tasks hold no logic of their own: the container work is ``lab.container`` (``engine``,
``image``, ``run``, ``repro``, ``base``) and everything else is ``python -m lab``. Tasks that
build or run the image need Docker (and root, or membership of the docker group). A
``LabError`` leaves a task as one sentence and its exit status (:func:`lab_errors`).
"""

from __future__ import annotations

import functools
import glob
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from lab.container import base as debootstrap
from lab.container import engine, locks, repro
from lab.container import image as images
from lab.container import run as container
from lab.errors import LabError, UsageError

ROOT = Path(__file__).resolve().parent
P = ParamSpec("P")

HELP_RUN = {
    "scenario": "a scenario to run (repeatable); default: every scenario",
    "collector": "none, strace, bpftrace, perf or all (default: all)",
    "packets": "off, best-effort or required (default: required when capture is possible)",
    "repetitions": "repetitions per scenario (default: 1)",
    "size": "source file size in bytes (default: the scenario's)",
    "local": "run on this host instead of in the container",
    "privileged": "run the container with --privileged instead of the explicit capability set",
    "rebuild": "rebuild the image even when its inputs did not change",
    "shard": "run only shard I/N of the scenario × repetition units (e.g. 2/3)",
    "run_id": "the run id (with --shard: the id every shard shares; default: from the inputs)",
}


def _ctx() -> engine.Context:
    return engine.Context.for_repo(ROOT)


def lab_errors(body: Callable[P, None]) -> Callable[P, None]:
    """Turn a :class:`LabError` into the lab's one sentence and its exit status.

    invoke prints the message on stderr and exits with the code, never a traceback."""

    @functools.wraps(body)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            body(*args, **kwargs)
        except LabError as error:
            raise Exit(f"error: {error}", code=error.exit_code) from None

    return wrapper


def _host_lab(c: Context, args: list[str]) -> None:
    """``python -m lab ARGS`` on this host; its exit status becomes the task's."""
    result = c.run(
        shlex.join([sys.executable, "-m", "lab", *args]), pty=sys.stdout.isatty(), warn=True
    )
    if result is not None and result.exited:
        raise SystemExit(result.exited)


def _in_container(
    args: list[str],
    *,
    privileged: bool = False,
    rebuild: bool = False,
    mounts: tuple[tuple[Path, str], ...] = (),
) -> None:
    done = container.run_lab(_ctx(), args, privileged=privileged, mounts=mounts, rebuild=rebuild)
    if done.exit_status:
        raise SystemExit(done.exit_status)


# --- lab ------------------------------------------------------------------------------


@task(help={"no_cache": "build every layer again", "base_image": "the pinned base reference"})
@lab_errors
def build(
    c: Context, no_cache: bool = False, base_image: str = debootstrap.DEFAULT_BASE_IMAGE
) -> None:
    """Build the lab image (pulls the pinned base, or bootstraps it where no registry is)."""
    ctx = _ctx()
    engine.ensure_engine(ctx, install=True)
    identity = images.build_image(ctx, base_image=base_image, no_cache=no_cache)
    base = identity["base"]
    print(f"image {identity['name']} {identity['id']} (base: {base['path']} {base['reference']})")
    print(f"client sha256 {identity['client_sha256']}; identity in artifacts/.image.json")


@task(iterable=["scenario"], help=HELP_RUN)
@lab_errors
def run(
    c: Context,
    scenario: list[str] | None = None,
    collector: str = "all",
    packets: str | None = None,
    repetitions: int = 1,
    size: int | None = None,
    local: bool = False,
    privileged: bool = False,
    rebuild: bool = False,
    shard: str | None = None,
    run_id: str | None = None,
) -> None:
    """Run the scenarios (default: all) and write a signed evidence archive to artifacts/."""
    # Inside the container the capture capability is granted; on the host only root has it.
    capture = "required" if (not local or os.geteuid() == 0) else "best-effort"
    args = ["run", *(scenario or []), *([] if scenario else ["--all"])]
    args += ["--collector", collector, "--packets", packets or capture]
    args += ["--repetitions", str(repetitions)]
    if size is not None:
        args += ["--size", str(size)]
    args += ["--shard", shard] if shard else []
    args += ["--run-id", run_id] if run_id else []
    if local:
        _host_lab(c, [*args, "--out", str(ROOT / "artifacts")])
        return
    _in_container(
        [*args, "--out", container.CONTAINER_ARTIFACTS], privileged=privileged, rebuild=rebuild
    )


@task(help={"json": "machine-readable output", "local": "on this host, not in the container"})
@lab_errors
def doctor(c: Context, json: bool = False, local: bool = False, privileged: bool = False) -> None:
    """Say which observers work here, and why not."""
    args = ["doctor", *(["--json"] if json else [])]
    if local:
        _host_lab(c, args)
    else:
        _in_container(args, privileged=privileged)


@task
@lab_errors
def shell(c: Context, privileged: bool = False) -> None:
    """An interactive shell in the lab image, with the same mounts and capabilities as a run."""
    ctx = _ctx()
    info = engine.ensure_engine(ctx, install=True)
    identity = images.ensure_image(ctx)
    argv = container.shell_argv(ctx, identity, info, privileged=privileged)
    c.run(shlex.join(argv), pty=True)


@task(help={"archive": "the .tar.gz to verify", "pubkey": "the public key to trust"})
@lab_errors
def verify(c: Context, archive: str, pubkey: str | None = None, selftest: bool = False) -> None:
    """Verify an evidence archive on this host (no container needed)."""
    args = ["verify", archive, *(["--pubkey", pubkey] if pubkey else [])]
    _host_lab(c, [*args, *(["--selftest"] if selftest else [])])


@task(
    iterable=["archive"],
    help={
        "archive": "a shard archive, or a glob of them (repeatable)",
        "pubkey": "the public key every shard must be signed with",
        "out": "where the merged run and its archive go (default artifacts/)",
    },
)
@lab_errors
def merge(c: Context, pubkey: str, archive: list[str] | None = None, out: str = "") -> None:
    """Verify the shard archives of one run and merge them into one signed run.

    It runs on this host: merging runs no tracer and no client."""
    found: list[str] = []
    for pattern in archive or []:
        # a pattern that matches nothing is passed on, and lab merge names the missing file
        found += sorted(glob.glob(pattern)) or [pattern]
    if not found:
        raise UsageError("lab.merge needs the shard archives: --archive 'shards/*.tar.gz'.")
    args = ["merge", *found, "--pubkey", pubkey, "--out", out or str(ROOT / "artifacts")]
    _host_lab(c, args)


@task(
    help={
        "patch": "a patch to the reference client (git diff against native/)",
        "source_dir": "a client source tree with a Makefile",
        "binary": "a client executable",
        "repetitions": "repetitions of the contract conditions (default 3)",
        "timing_runs": "untraced timing rounds, candidate and baseline alternated (default 20)",
        "local": "build and judge on this host, not in the lab image",
        "shard": "judge only shard I/N of the condition × repetition units (e.g. 2/3)",
        "run_id": HELP_RUN["run_id"],
    }
)
@lab_errors
def evaluate(
    c: Context,
    patch: str | None = None,
    source_dir: str | None = None,
    binary: str | None = None,
    repetitions: int | None = None,
    timing_runs: int | None = None,
    local: bool = False,
    shard: str | None = None,
    run_id: str | None = None,
) -> None:
    """Judge a client someone else wrote against the frozen contract, in the lab image.

    ``python -m lab evaluate`` builds the image and mounts the candidate read-only."""
    choices = (("--patch", patch), ("--source-dir", source_dir), ("--binary", binary))
    given = [(flag, value) for flag, value in choices if value]
    if len(given) != 1:
        raise UsageError("lab.evaluate needs exactly one of --patch, --source-dir, --binary.")
    flag, value = given[0]
    args = ["evaluate", flag, value, "--out", str(ROOT / "artifacts")]
    if repetitions is not None:
        args += ["--repetitions", str(repetitions)]
    if timing_runs is not None:
        args += ["--timing-runs", str(timing_runs)]
    args += ["--shard", shard] if shard else []
    args += ["--run-id", run_id] if run_id else []
    _host_lab(c, [*args, *(["--local"] if local else [])])


@task(
    iterable=["agent_env"],
    help={
        "task": "the task file (default: campaigns/speedup.yaml)",
        "agent_env": "an environment variable handed to the agent (repeatable; its model's "
        "key, say; recorded by name only)",
        "agent_cmd": "the agent's command, run with sh -c in the sandbox (files it names "
        "are copied in read-only)",
        "repetitions": "agent runs (default: the task's)",
        "budget": "seconds per agent run (default: the task's)",
        "require": "repetitions that must meet the task for exit 0 (default: all)",
        "agent_network": "host (default), none, or model=HOST:PORT (the agent's own network, "
        "whose only way out is the lab's forwarder to that endpoint; comma-separated for more)",
        "stop_on_plateau": "end a run after K judged snapshots with no new passing clause",
        "escalate_cmd": "a second agent given each run the first did not meet, with its "
        "signed evidence package",
        "recalibrate": "judge a fixture task's seeds again even when a kept calibration matches",
        "json": "print one JSON document on stdout",
        "local": "run on this host instead of in the container",
        "shard": "conduct only shard I/N of the agent runs (e.g. 2/3)",
        "run_id": HELP_RUN["run_id"],
    },
)
@lab_errors
def campaign(
    c: Context,
    agent_cmd: str,
    task: str = "campaigns/speedup.yaml",
    repetitions: int | None = None,
    budget: float | None = None,
    require: int | None = None,
    agent_network: str = "host",
    agent_env: list[str] | None = None,
    stop_on_plateau: int | None = None,
    escalate_cmd: str | None = None,
    recalibrate: bool = False,
    json: bool = False,
    local: bool = False,
    shard: str | None = None,
    run_id: str | None = None,
) -> None:
    """Run a coding agent N times on a frozen task and judge every result, in the lab image.

    ``python -m lab campaign`` builds the image and mounts the task and the agent's files."""
    args = ["campaign", "--task", task, "--agent-cmd", agent_cmd, "--out", str(ROOT / "artifacts")]
    args += ["--agent-network", agent_network]
    for name in agent_env or []:
        args += ["--agent-env", name]
    for flag, value in (
        ("--repetitions", repetitions),
        ("--budget", budget),
        ("--require", require),
        ("--stop-on-plateau", stop_on_plateau),
        ("--escalate-cmd", escalate_cmd),
        ("--shard", shard),
        ("--run-id", run_id),
    ):
        if value is not None:
            args += [flag, str(value)]
    args += ["--recalibrate"] if recalibrate else []
    _host_lab(c, [*args, *(["--json"] if json else []), *(["--local"] if local else [])])


@task(help={"artifacts": "also delete artifacts/ (evidence archives included)"})
@lab_errors
def clean(c: Context, artifacts: bool = False) -> None:
    """Remove the image, the fetched wheels and native build outputs."""
    ctx = _ctx()
    if shutil.which("docker"):
        c.run(shlex.join(["docker", "image", "rm", "--force", images.IMAGE]), warn=True)
    shutil.rmtree(ROOT / "docker" / "wheels", ignore_errors=True)
    c.run(shlex.join(["make", "-C", str(ROOT / "native"), "clean"]), warn=True)
    shutil.rmtree(ctx.image_dir, ignore_errors=True)
    for name in (".image.json", ".container.json"):
        (ctx.artifacts / name).unlink(missing_ok=True)
    if artifacts:
        for child in ctx.artifacts.iterdir():
            if child.name != ".gitkeep":
                shutil.rmtree(child) if child.is_dir() else child.unlink()


# --- keys -----------------------------------------------------------------------------


@task(name="generate", help={"out": "directory for lab.key (secret) and lab.pub"})
@lab_errors
def keys_generate(c: Context, out: str = "keys") -> None:
    """Make a signing key pair (signify format)."""
    _host_lab(c, ["keys", "generate", "--out", out])


# --- image ----------------------------------------------------------------------------


@task(name="lock", help={"base_image": "the base to resolve in"})
@lab_errors
def image_lock(c: Context, base_image: str = debootstrap.DEFAULT_BASE_IMAGE) -> None:
    """Re-pin docker/apt-packages.lock and docker/requirements.lock from the archives."""
    ctx = _ctx()
    engine.ensure_engine(ctx, install=True)
    written = locks.relock(ctx.root, work=ctx.image_dir, log=ctx.log, base_image=base_image)
    for path in written:
        print(f"wrote {path.relative_to(ROOT)}")


@task(name="repro", help={"builds": "how many clean builds to compare (default 2)"})
@lab_errors
def image_repro(c: Context, builds: int = 2) -> None:
    """Build the image from a clean cache several times and compare the results."""
    ctx = _ctx()
    engine.ensure_engine(ctx, install=True)
    report = repro.reproduce(ctx, builds=builds)
    for row in report["builds"]:
        print(
            f"{row['name']}: image {row['id']} client {row['client_sha256']} "
            f"packages {row['packages_sha256']} ({row['build_seconds']} s)"
        )
    print(
        f"client identical: {report['client_identical']}; packages identical: "
        f"{report['packages_identical']}; image identical: {report['image_identical']} "
        f"(layers differing: {report['differing_layers']} of {report['layers']})"
    )


lab = Collection("lab", build, run, doctor, shell, verify, evaluate, campaign, merge)
keys = Collection("keys", keys_generate)
image = Collection("image", image_lock, image_repro)
ns = Collection(lab, keys, image, clean)
