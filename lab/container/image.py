"""The lab image: what it is built from, building it, and reusing it while its inputs are
unchanged.

    identity = ensure_image(ctx)            # built once per set of inputs, then cached
    identity["id"], identity["client_sha256"], identity["packages_sha256"]
    inputs_digest(ctx.root)                 # the build cache key (a label on the image)

The build reaches only the Debian archive: the Python wheels are fetched first, with their
hashes checked (:func:`fetch_wheels`), and installed with no package index.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lab.container.base import DEFAULT_BASE_IMAGE, BaseImage, render_sources, resolve_base
from lab.container.engine import Context, follow, write_json
from lab.errors import ContainerError
from lab.host import procs
from lab.host.identity import chain_id

#: the image's tag; ``LAB_IMAGE`` names another (two checkouts building on one engine)
IMAGE = os.environ.get("LAB_IMAGE") or "execution-evidence-lab:local"
#: label holding the digest of every file the image is built from (the build cache key)
INPUTS_LABEL = "dev.execution-evidence-lab.inputs"
SOURCE_URL = "https://github.com/execution-evidence-lab/execution-evidence-lab"


#: the files the image is built from (the build context allow-list in .dockerignore)
BUILD_INPUTS = (
    "Dockerfile",
    ".dockerignore",
    "docker",
    "native",
    "lab",
    "scenarios",
    "probes",
    "campaigns",
    "pyproject.toml",
    "docs/protocol.md",
    "docs/client-contract.md",
)
#: lab/_data/* link to the top-level directories (lab/resources.py): their files are counted
#: once, under their own names
_SKIP_INPUT = re.compile(
    r"(__pycache__|\.pyc$|\.o$|^native/backup-client$|^docker/wheels/|^lab/_data/)"
)


#: the platforms ``pip download`` may pick wheels for: Debian 12 has glibc 2.36, and pip 23
#: does not expand one manylinux tag into the older ones it implies
WHEEL_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
)


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
        write_json(ctx.artifacts / ".image.json", identity)
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
    layers = list((info.get("RootFS") or {}).get("Layers") or [])
    repo_digests = [d.split("@", 1)[1] for d in info.get("RepoDigests") or [] if "@" in d]
    return {
        "name": tag,
        # the engine's local ID (the digest of the image's configuration) and the content
        # digest (the layers' ChainID): two fields, two meanings (docs/build-type.md)
        "id": info.get("Id"),
        "content_digest": chain_id(layers),
        # a registry's manifest digest, only when the image was pushed or pulled
        "repo_digest": repo_digests[0] if repo_digests else None,
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
