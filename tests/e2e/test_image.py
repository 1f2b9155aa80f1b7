"""The lab image, for real: built (or reused when its inputs are unchanged), started with the
explicit capability set, and the observers run inside it against the host kernel.

Needs a running Docker engine (``LAB_REQUIRE_CAPABILITIES=docker`` turns the skip into a
failure) and the Debian archive for the first build.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.container import engine
from lab.container import image as images
from lab.container import run as container
from lab.errors import ContainerError
from lab.host import procs
from tests.conftest import ROOT, require

UPROBE = (
    "uprobe:/lab/native/backup-client:hash_file /pid == cpid/ { @hash = count(); } "
    "tracepoint:syscalls:sys_enter_connect /pid == cpid/ { @connects = count(); }"
)
CLIENT = "/lab/native/backup-client --source /etc/hostname --receiver 127.0.0.1:9"


def _engine() -> tuple[bool, str | None]:
    if shutil.which("docker") is None:
        return False, "docker is not installed"
    try:
        engine.engine(engine.Context.for_repo(ROOT))
    except ContainerError as error:
        return False, str(error)
    return True, None


@pytest.fixture(scope="module")
def identity() -> Iterator[dict[str, Any]]:
    available, reason = _engine()
    require("docker", available, reason)
    repo = engine.Context.for_repo(ROOT)
    quiet = engine.Context(
        root=repo.root, artifacts=repo.artifacts, log=repo.log, echo=lambda _: None
    )
    yield images.ensure_image(quiet)


@pytest.fixture
def ctx(tmp_path: Path, identity: dict[str, Any]) -> engine.Context:
    """A context whose artifacts directory is a fresh temporary one."""
    arts = tmp_path / "artifacts"
    arts.mkdir()
    (arts / ".image.json").write_text(json.dumps(identity))
    return engine.Context(
        root=ROOT,
        artifacts=arts,
        log=procs.CommandLog(arts / "commands.jsonl"),
        echo=lambda _: None,
    )


def _run(
    ctx: engine.Context,
    command: list[str],
    *,
    options: container.RunOptions | None = None,
    drop: tuple[str, ...] = (),
) -> tuple[int | None, str]:
    options = options or container.RunOptions(artifacts=ctx.artifacts)
    options, _ = container.probe_container(ctx, images.IMAGE, options)
    argv = container.run_argv(images.IMAGE, command, options)
    for flag in drop:
        at = argv.index(flag)
        del argv[at : at + 2]
    out = ctx.artifacts / "out.txt"
    done = procs.run(
        argv, purpose="test", stdout=out, stderr=out.with_suffix(".err"), timeout=300, accept=None
    )
    text = out.read_text(errors="replace") + out.with_suffix(".err").read_text(errors="replace")
    return done.exit_status, text


def test_manifest_records_the_lock_and_the_client(ctx: engine.Context) -> None:
    manifest = images.image_manifest(ctx, images.IMAGE)
    lock = (ROOT / "docker" / "apt-packages.lock").read_text().splitlines()
    pins = [line for line in lock if line and not line.startswith("#")]
    assert manifest["packages"].splitlines() == pins
    status, text = _run(ctx, ["sha256sum", "/lab/native/backup-client"])
    assert status == 0
    assert text.split()[0] == manifest["client_sha256"]


def test_the_container_holds_what_the_collectors_need(ctx: engine.Context) -> None:
    options, held = container.probe_container(
        ctx, images.IMAGE, container.RunOptions(artifacts=ctx.artifacts)
    )
    for cap in ("SYS_ADMIN", "NET_RAW", "SETUID", "SETGID", "KILL"):
        assert cap in held["capabilities"]
    # Nothing beyond the set asked for.
    assert set(held["capabilities"]) <= set(options.capabilities)


@pytest.mark.parametrize(
    ("command", "expect"),
    [
        (["bpftrace", "-e", 'BEGIN { printf("ready\\n"); exit(); }'], "ready"),
        (["perf", "record", "-e", "cpu-clock", "-o", "/tmp/p.data", "--", "true"], "samples"),
        (["strace", "-f", "-e", "trace=execve", "true"], "execve("),
        (["tcpdump", "-D"], "lo"),
    ],
    ids=["bpftrace", "perf", "strace", "tcpdump"],
)
def test_observers_run_inside(ctx: engine.Context, command: list[str], expect: str) -> None:
    status, text = _run(ctx, command)
    assert status == 0, text
    assert expect in text


def test_loopback_capture_inside(ctx: engine.Context) -> None:
    script = (
        "tcpdump -i lo -n -c 2 -w /tmp/c.pcap tcp port 9 2>/tmp/err & sleep 1; "
        "/lab/native/backup-client --source /etc/hostname --receiver 127.0.0.1:9 >/dev/null; "
        "wait; cat /tmp/err"
    )
    status, text = _run(ctx, ["sh", "-c", script])
    assert status == 0, text
    assert "2 packets captured" in text


def test_bpftrace_counts_only_with_host_pids(ctx: engine.Context) -> None:
    status, text = _run(ctx, ["bpftrace", "-e", UPROBE, "-c", CLIENT])
    assert status == 0, text
    assert "@hash: 1" in text and "@connects: 1" in text
    # The reason for --pid host: in a private PID namespace the same filter matches nothing.
    status, text = _run(ctx, ["bpftrace", "-e", UPROBE, "-c", CLIENT], drop=("--pid",))
    assert status == 0, text
    assert "@hash: 1" not in text


def test_a_stale_lock_fails_with_one_sentence(ctx: engine.Context) -> None:
    lock = ctx.artifacts / "stale.lock"
    lock.write_text("# stale\nmake=4.3-4.1\ngcc-12=0.0-not-served\n")
    # As in `docker build`: the engine's default privileges, the Debian archive reachable.
    argv = [
        "docker",
        "run",
        "--rm",
        "--network",
        "host",
        "-v",
        f"{lock}:/tmp/l:ro",
        "--entrypoint",
        "sh",
        images.IMAGE,
        "/opt/lab/docker/apt-install.sh",
        "/tmp/l",
    ]
    err = ctx.artifacts / "stale.err"
    done = procs.run(argv, purpose="test", stderr=err, timeout=300, accept=None)
    assert done.exit_status == 1
    lines = [line for line in err.read_text().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "gcc-12=0.0-not-served" in lines[0] and "invoke image.lock" in lines[0]
    assert "make=4.3-4.1" not in lines[0]


def test_artifacts_go_back_to_their_owner(
    ctx: engine.Context, identity: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    require("root", os.geteuid() == 0, "handing files to another user needs root")
    monkeypatch.setenv("SUDO_UID", "4321")
    monkeypatch.setenv("SUDO_GID", "4321")
    options = container.RunOptions(artifacts=ctx.artifacts)
    options, _ = container.probe_container(ctx, images.IMAGE, options)
    done = container.run_in_container(
        ctx, identity, ["sh", "-c", "mkdir /lab/artifacts/d && touch /lab/artifacts/d/f"], options
    )
    assert done.exit_status == 0
    assert (ctx.artifacts / "d" / "f").stat().st_uid == 4321
    assert (ctx.artifacts / "d").stat().st_gid == 4321


def test_lab_run_in_container_counts_hash_storm(ctx: engine.Context) -> None:
    """The whole path of ``invoke lab.run``: probe, run, provenance, non-zero eBPF counters."""
    container.run_lab(
        ctx,
        [
            "run",
            "hash-storm",
            "--collector",
            "bpftrace",
            "--packets",
            "required",
            "--no-archive",
            "--out",
            container.CONTAINER_ARTIFACTS,
        ],
        install=False,
    )
    results = sorted(ctx.artifacts.glob("run-*/results.json"))
    assert results, "the lab wrote no results.json"
    data = json.loads(results[-1].read_text())
    invocations = data["scenarios"][0]["invocations"]
    assert [inv["observed"]["bpftrace"]["hash_calls"] for inv in invocations] == [256, 256]
    assert all(inv["observed"]["packets"]["packets"] > 0 for inv in invocations)
    record = json.loads((ctx.artifacts / ".container.json").read_text())
    assert "SYS_ADMIN" in record["container"]["capabilities"]
    env = data["environment"]
    assert env["in_container"] is True
    assert env["image"]["container"]["cap_eff"] == record["container"]["cap_eff"]
    assert env["client_sha256"] == record["client_sha256"]
