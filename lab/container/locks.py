"""The image's package locks: ``docker/apt-packages.lock`` and ``docker/requirements.lock``
resolved inside a container from the base image itself (:mod:`lab.container.base`), so the
versions locked are the ones that base's APT and Python see.

    relock(Path("."), work=Path("artifacts/.image"), log=log)   # rewrite docker/*.lock
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from lab.container.base import DEFAULT_BASE_IMAGE, render_sources, resolve_base
from lab.host import procs


def host_ca_bundle(env: Mapping[str, str]) -> Path | None:
    """The CA bundle the host's pip trusts, when it names one (a TLS-inspecting proxy)."""
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = env.get(name, "").strip()
        if value and Path(value).is_file():
            return Path(value).resolve()
    return None


def lock_argv(base: str, root: Path, out: Path, ca_bundle: Path | None) -> list[str]:
    argv = ["docker", "run", "--rm", "--network", "host", "-v", f"{root}:/src:ro"]
    argv += ["-v", f"{out}:/out"]
    if ca_bundle is not None:
        argv += [
            "-v",
            f"{ca_bundle}:/etc/lab-host-ca.crt:ro",
            "-e",
            "PIP_CERT=/etc/lab-host-ca.crt",
        ]
    return [*argv, base, "sh", "/src/docker/lock.sh"]


def relock(
    root: Path,
    *,
    work: Path,
    log: procs.CommandLog | None,
    base_image: str = DEFAULT_BASE_IMAGE,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """Resolve docker/apt-packages.in and pyproject's dependencies to docker/*.lock.

    The resolution runs in a container from the base image itself, so the versions locked
    are the ones that base's APT and Python see.
    """
    render_sources(root)
    base = resolve_base(base_image, workdir=Path("/var/tmp/lab-base"), log=log)
    out = work / "lock"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ca_bundle = host_ca_bundle(os.environ if env is None else env)
    procs.run(
        lock_argv(base.reference, root, out, ca_bundle),
        purpose="resolve the image's package locks",
        log=log,
        tool="docker",
        stdout=work / "lock.log",
        stderr=work / "lock.err",
        timeout=1800,
    )
    written = []
    for name in ("apt-packages.lock", "requirements.lock"):
        target = root / "docker" / name
        shutil.copyfile(out / name, target)
        written.append(target)
    return written
