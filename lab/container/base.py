"""The lab image's base: the pinned ``debian:bookworm-slim`` digest, or a local equivalent.

Where no registry is reachable the pinned base cannot be pulled, so an equivalent Debian
bookworm root filesystem is bootstrapped from the Debian archive (``debootstrap
--variant=minbase``, the variant the official slim images are made from) and imported as a
local image. Which path was taken is recorded, because it changes what the image digest means.

    log = CommandLog(Path("artifacts/.image/commands.jsonl"))
    base = resolve_base(DEFAULT_BASE_IMAGE, workdir=Path("/var/tmp/lab-base"), log=log)
    base.reference      # what the Dockerfile's BASE_IMAGE build argument receives
    base.as_dict()      # {"path": "debootstrap", "tarball_sha256": "...", "mirror": "...", ...}
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

from lab.errors import ContainerError
from lab.host import procs

#: debian:bookworm-slim 12.11 (2025-05-17), the multi-arch index digest that Docker Hub served
#: for the tags ``bookworm-slim``, ``12-slim`` and ``12.11-slim`` (found in public Dockerfiles
#: and in a Nix image set that lists it as finalImageTag "12.11-slim").
DEFAULT_BASE_IMAGE = (
    "debian:bookworm-slim@sha256:2424c1850714a4d94666ec928e24d86de958646737b1d113f5b2207be44d37d8"
)
SUITE = "bookworm"
SECURITY_SUITE = f"{SUITE}-security"
#: the image's APT sources: a template in the repository, rendered for this machine
SOURCES_TEMPLATE = Path("docker/debian.sources.in")
SOURCES_RENDERED = Path("docker/debian.sources")
#: repository of the locally bootstrapped bases, tagged ``bookworm-YYYYMMDD``
LOCAL_BASE_REPO = "lab-base"
#: label on a bootstrapped base holding its provenance (JSON)
PROVENANCE_LABEL = "dev.execution-evidence-lab.base-provenance"


@dataclass(frozen=True)
class BaseImage:
    """The base the image was built on and how it was obtained."""

    #: the value given to the Dockerfile's ``BASE_IMAGE`` build argument
    reference: str
    #: "pulled" (from a registry), "local" (the pinned digest was already present) or
    #: "debootstrap" (bootstrapped here from the Debian archive)
    path: str
    #: the pinned reference the lab asks for, whichever path was taken
    pinned: str
    #: "sha256:..." repository digest when pulled or present
    digest: str | None = None
    #: local image ID ("sha256:...")
    image_id: str | None = None
    #: sha256 of the root-filesystem tarball that was imported (debootstrap path)
    tarball_sha256: str | None = None
    mirror: str | None = None
    suite: str | None = None
    #: when the root filesystem was bootstrapped (RFC 3339, UTC)
    bootstrapped_at: str | None = None
    variant: str | None = None
    #: the ``Date:`` of the archive's Release file debootstrap fetched (RFC 3339, UTC): the
    #: state of the Debian archive the snapshot was taken from
    archive_date: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """One coherent record of the base. A pinned image (pulled, or already present)
        names its registry digest; a bootstrapped one its snapshot of the Debian archive
        (suite, variant, mirror, the archive's date, when it was bootstrapped, the root
        filesystem's digest) and names the pinned image it stands in for as such, never as
        the image that was used."""
        record: dict[str, Any] = {"path": self.path, "reference": self.reference}
        if self.path == "debootstrap":
            snapshot = {
                k: v for k, v in asdict(self).items() if k in _SNAPSHOT_FIELDS and v is not None
            }
            record["snapshot"] = snapshot
            record["stands_in_for"] = self.pinned
        else:
            record["digest"] = self.digest
        record["image_id"] = self.image_id
        return {k: v for k, v in record.items() if v is not None}


#: what a bootstrapped base's record says about its snapshot of the Debian archive
_SNAPSHOT_FIELDS = (
    "suite",
    "variant",
    "mirror",
    "archive_date",
    "bootstrapped_at",
    "tarball_sha256",
)


def archive_date(rootfs: Path) -> str | None:
    """The ``Date:`` field of the Release file debootstrap left in ``rootfs`` (the archive's
    state it bootstrapped from), as RFC 3339 UTC; None when there is none."""
    lists = rootfs / "var" / "lib" / "apt" / "lists"
    for path in sorted(lists.glob("*Release")) if lists.is_dir() else []:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Date:"):
                try:
                    when = email.utils.parsedate_to_datetime(line.split(":", 1)[1].strip())
                except (TypeError, ValueError):
                    return None
                return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return None


def debian_mirror(
    apt_dir: Path = Path("/etc/apt"),
    suite: str = SUITE,
    env: Mapping[str, str] | None = None,
) -> str:
    """The Debian archive this machine's APT uses for ``suite`` (deb822 or one-line lists),
    or ``LAB_DEBIAN_MIRROR``. Security and ports archives are skipped: debootstrap needs
    the main archive."""
    override = (os.environ if env is None else env).get("LAB_DEBIAN_MIRROR")
    if override:
        return override.rstrip("/")
    found = _find_mirror(apt_dir, suite, security=False)
    if found is None:
        raise ContainerError(
            f"no Debian archive for '{suite}' is configured in {apt_dir}; set "
            "LAB_DEBIAN_MIRROR to your Debian mirror's URL."
        )
    return found


def security_mirror(apt_dir: Path = Path("/etc/apt"), env: Mapping[str, str] | None = None) -> str:
    """The security archive this machine's APT uses, or ``LAB_DEBIAN_SECURITY_MIRROR``;
    by Debian's layout, ``<main archive>-security`` when none is configured."""
    override = (os.environ if env is None else env).get("LAB_DEBIAN_SECURITY_MIRROR")
    if override:
        return override.rstrip("/")
    return _find_mirror(apt_dir, SECURITY_SUITE, security=True) or (
        debian_mirror(apt_dir, env=env) + "-security"
    )


def render_sources(root: Path, apt_dir: Path = Path("/etc/apt")) -> Path:
    """Write docker/debian.sources (ignored by git) from its template for this machine."""
    text = (root / SOURCES_TEMPLATE).read_text(encoding="utf-8")
    text = text.replace("@SECURITY_MIRROR@", security_mirror(apt_dir))
    text = text.replace("@MIRROR@", debian_mirror(apt_dir))
    target = root / SOURCES_RENDERED
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return target


def _find_mirror(apt_dir: Path, suite: str, *, security: bool) -> str | None:
    candidates: list[Path] = []
    if (apt_dir / "sources.list").is_file():
        candidates.append(apt_dir / "sources.list")
    folder = apt_dir / "sources.list.d"
    if folder.is_dir():
        candidates += sorted(p for p in folder.iterdir() if p.suffix in (".list", ".sources"))
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = _mirror_in(text, deb822=path.suffix == ".sources", suite=suite, security=security)
        if found:
            return found
    return None


def _mirror_in(text: str, *, deb822: bool, suite: str, security: bool = False) -> str | None:
    def usable(uri: str) -> bool:
        return uri.startswith(("http://", "https://")) and ("security" in uri) == security

    if not deb822:
        for line in text.splitlines():
            parts = line.split("#", 1)[0].split()
            # "deb [options] URI SUITE COMPONENTS..."
            parts = [p for p in parts if not (p.startswith("[") or p.endswith("]"))]
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite and usable(parts[1]):
                return parts[1].rstrip("/")
        return None
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if (
            "deb" not in fields.get("types", "").split()
            or suite not in fields.get("suites", "").split()
        ):
            continue
        for uri in fields.get("uris", "").split():
            if usable(uri):
                return uri.rstrip("/")
    return None


def _inspect(reference: str, log: procs.CommandLog | None) -> dict[str, Any] | None:
    try:
        done = procs.run(
            ["docker", "image", "inspect", reference],
            purpose="look up a local image",
            log=log,
            tool="docker",
            timeout=60,
            accept=None,
            capture=True,
        )
    except procs.CommandFailed:
        return None
    if done.exit_status != 0:
        return None
    rows: list[dict[str, Any]] = json.loads(done.output or b"[]")
    return rows[0] if rows else None


def _repo_digest(info: dict[str, Any]) -> str | None:
    for entry in info.get("RepoDigests") or []:
        if "@" in entry:
            return str(entry.split("@", 1)[1])
    return None


def local_bases(log: procs.CommandLog | None) -> list[str]:
    """Bootstrapped bases present locally, newest tag first."""
    done = procs.run(
        ["docker", "images", LOCAL_BASE_REPO, "--format", "{{.Repository}}:{{.Tag}}"],
        purpose="list bootstrapped bases",
        log=log,
        tool="docker",
        timeout=60,
        capture=True,
    )
    tags = [t for t in (done.output or b"").decode().split() if f":{SUITE}-" in t]
    return sorted(tags, reverse=True)


def _from_local_base(tag: str, pinned: str, log: procs.CommandLog | None) -> BaseImage | None:
    info = _inspect(tag, log)
    if info is None:
        return None
    labels = (info.get("Config") or {}).get("Labels") or {}
    try:
        recorded: dict[str, Any] = json.loads(labels.get(PROVENANCE_LABEL, "{}"))
    except json.JSONDecodeError:
        recorded = {}
    return BaseImage(
        reference=tag,
        path="debootstrap",
        pinned=pinned,
        image_id=str(info.get("Id")),
        tarball_sha256=recorded.get("tarball_sha256"),
        mirror=recorded.get("mirror"),
        suite=recorded.get("suite"),
        bootstrapped_at=recorded.get("bootstrapped_at"),
        variant=recorded.get("variant"),
        archive_date=recorded.get("archive_date"),
    )


def resolve_base(
    pinned: str = DEFAULT_BASE_IMAGE,
    *,
    workdir: Path,
    log: procs.CommandLog | None = None,
    mirror: str | None = None,
    pull: bool = True,
    bootstrap: bool = True,
) -> BaseImage:
    """The base to build on: the pinned image (present or pulled), else a bootstrapped one.

    A bootstrapped base already present locally is reused (newest first), so only the first
    build on a machine without a registry pays for ``debootstrap``.
    """
    info = _inspect(pinned, log)
    if info is not None:
        return BaseImage(
            reference=pinned,
            path="local",
            pinned=pinned,
            digest=_repo_digest(info),
            image_id=str(info.get("Id")),
        )
    if pull:
        done = procs.run(
            ["docker", "pull", pinned],
            purpose="pull the pinned base image",
            log=log,
            tool="docker",
            timeout=300,
            accept=None,
        )
        info = _inspect(pinned, log) if done.exit_status == 0 else None
        if info is not None:
            return BaseImage(
                reference=pinned,
                path="pulled",
                pinned=pinned,
                digest=_repo_digest(info),
                image_id=str(info.get("Id")),
            )
    for tag in local_bases(log):
        found = _from_local_base(tag, pinned, log)
        if found is not None:
            return found
    if not bootstrap:
        raise ContainerError(
            f"the base image {pinned} cannot be pulled and no bootstrapped '{LOCAL_BASE_REPO}' "
            "image exists; run 'invoke lab.build' as root with debootstrap installed to make one."
        )
    return bootstrap_base(workdir=workdir, mirror=mirror or debian_mirror(), log=log, pinned=pinned)


def bootstrap_base(
    *,
    workdir: Path,
    mirror: str,
    log: procs.CommandLog | None,
    pinned: str = DEFAULT_BASE_IMAGE,
    suite: str = SUITE,
    today: str | None = None,
) -> BaseImage:
    """``debootstrap --variant=minbase`` a root filesystem and import it as a local image.

    As root on Debian, a missing debootstrap is installed first (the README's one-line
    set-up); elsewhere its absence is one sentence naming the package."""
    if (
        procs.which("debootstrap") is None
        and os.geteuid() == 0
        and Path("/etc/debian_version").exists()
    ):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "debootstrap"]):
            procs.run(argv, purpose="install debootstrap", log=log, env=env, timeout=1200)
    procs.require_tool("debootstrap")
    stamp = today or time.strftime("%Y%m%d", time.gmtime())
    rootfs = workdir / f"{suite}-{stamp}"
    tarball = workdir / f"{suite}-{stamp}.tar"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    workdir.mkdir(parents=True, exist_ok=True)
    bootstrapped_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    procs.run(
        ["debootstrap", "--variant=minbase", suite, str(rootfs), mirror],
        purpose="bootstrap a Debian root filesystem",
        log=log,
        tool="debootstrap",
        stdout=workdir / "debootstrap.log",
        stderr=workdir / "debootstrap.err",
        timeout=1800,
    )
    released = archive_date(rootfs)
    _slim(rootfs)
    procs.run(
        ["tar", "--sort=name", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."],
        purpose="pack the root filesystem",
        log=log,
        timeout=600,
    )
    digest = _sha256(tarball)
    provenance = {
        "path": "debootstrap",
        "variant": "minbase",
        "suite": suite,
        "mirror": mirror,
        "tarball_sha256": digest,
        "bootstrapped_at": bootstrapped_at,
        **({"archive_date": released} if released else {}),
    }
    tag = f"{LOCAL_BASE_REPO}:{suite}-{stamp}"
    done = procs.run(
        [
            "docker",
            "import",
            "--change",
            f"LABEL {PROVENANCE_LABEL}={json.dumps(json.dumps(provenance, sort_keys=True))}",
            "--change",
            'CMD ["bash"]',
            str(tarball),
            tag,
        ],
        purpose="import the bootstrapped root filesystem",
        log=log,
        tool="docker",
        timeout=600,
        capture=True,
    )
    shutil.rmtree(rootfs)
    tarball.unlink()
    return BaseImage(
        reference=tag,
        path="debootstrap",
        pinned=pinned,
        image_id=(done.output or b"").decode().strip() or None,
        tarball_sha256=digest,
        mirror=mirror,
        suite=suite,
        bootstrapped_at=bootstrapped_at,
        variant="minbase",
        archive_date=released,
    )


def _slim(rootfs: Path) -> None:
    """Drop what debootstrap leaves behind and the slim images do not carry."""
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*"):
        for path in rootfs.glob(pattern):
            if path.is_file():
                path.unlink()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
