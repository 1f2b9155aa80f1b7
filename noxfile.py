"""The lab's test sessions. ``nox`` runs the defaults: lint, typecheck, tests, e2e.

Sessions that need root or Docker say so in their docstring. On a Debian machine as root,
the sessions install the Debian packages they drive when they are missing (``e2e`` also
installs and starts the Docker engine through ``invoke lab.build``); elsewhere they say
what is missing and the tests that need it skip, naming it — unless ``LAB_REQUIRE_*``
turns those skips into failures (CI).
"""

from __future__ import annotations

import os
import runpy
import shutil
from pathlib import Path

import nox

nox.options.sessions = ["lint", "typecheck", "tests", "e2e"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"

#: the one tool -> Debian package table (lab/host/tools.py imports nothing, so it is read by
#: path: a nox session may start before the lab's dependencies are installed)
TOOLS = runpy.run_path(str(Path(__file__).resolve().parent / "lab" / "host" / "tools.py"))
HOST_TOOLS: dict[str, str] = TOOLS["host_tools"]()
#: files a package provides (compiler headers, the PDF report's fonts)
HEADERS: dict[str, str] = {**TOOLS["HEADER_PACKAGES"], **TOOLS["FONT_PACKAGES"]}


def host_packages(session: nox.Session) -> None:
    """Install the missing Debian packages when this is Debian and we are root."""
    missing = sorted(
        {pkg for tool, pkg in HOST_TOOLS.items() if shutil.which(tool) is None}
        | {pkg for header, pkg in HEADERS.items() if not Path(header).exists()}
    )
    if not missing:
        return
    if os.geteuid() != 0 or not Path("/etc/debian_version").exists():
        session.warn(
            f"missing Debian packages: {' '.join(missing)} (apt-get install them); the tests "
            "that need them will skip and say which capability is missing"
        )
        return
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    session.run("apt-get", "update", "-qq", external=True, env=env)
    session.run(
        "apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing,
        external=True, env=env,
    )  # fmt: skip


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Lint and check the formatting with ruff."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check lab/ and tasks.py with mypy --strict."""
    session.install("-e", ".[dev]")
    session.run("mypy", "--strict", "lab", "tasks.py")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the unit tests and the host integration tests (the collector tests need root).

    The collector tests need root (ptrace, eBPF, perf events, raw capture on lo); without it
    they skip and say which capability is missing, unless LAB_REQUIRE_COLLECTORS turns those
    skips into failures (CI)."""
    host_packages(session)
    session.install("-e", ".[dev,interop]")
    session.run("make", "-C", "native", external=True)
    session.run("pytest", "-ra", *(session.posargs or ["tests", "--ignore=tests/e2e"]))


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """Build the lab image and run what users run in it; needs Docker and root.

    Builds it (no registry needed: the base is bootstrapped with debootstrap; cached by its
    inputs), checks the observers inside it with the explicit
    capability set, then runs what users run — ``invoke lab.run`` and ``invoke
    lab.evaluate`` — and verifies the archives with our verifier, ``sha256sum -c``,
    ``signify-openbsd -V`` and ``minisign -V``. Needs Docker and root (installs and starts
    docker.io on Debian when absent); the first build takes about 4 minutes."""
    host_packages(session)
    session.install("-e", ".[dev]")
    session.run("make", "-C", "native", external=True)
    session.run("invoke", "lab.build")
    session.run("pytest", "-ra", "tests/e2e", *session.posargs)


@nox.session(python=PYTHON)
def repro(session: nox.Session) -> None:
    """Build the lab image twice from a clean cache and compare; needs Docker and root.

    With --no-cache, the client binary's SHA-256 and the package manifest must be identical;
    image IDs are reported with the layers that differ. Needs Docker and root; about 5
    minutes. Not a default session."""
    session.install("-e", ".[dev]")
    session.run("invoke", "image.repro", *session.posargs)
