"""The lab's test sessions. ``nox`` runs the defaults: lint, typecheck, tests, e2e.

Sessions that need root or Docker say so in their docstring.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests", "e2e"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on lab/."""
    session.install("-e", ".[dev]")
    session.run("mypy", "--strict", "lab")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests and host integration tests. The collector tests need root (ptrace, eBPF,
    perf events, raw capture on lo); without it they skip and say which capability is
    missing, unless LAB_REQUIRE_COLLECTORS turns those skips into failures (CI)."""
    session.install("-e", ".[dev]")
    session.run("make", "-C", "native", external=True)
    session.run("pytest", "-ra", *(session.posargs or ["tests", "--ignore=tests/e2e"]))


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """The lab image for real. Builds it (no registry needed: the base is bootstrapped with
    debootstrap; cached by its inputs), checks the observers inside it with the explicit
    capability set, then runs what users run — ``invoke lab.run`` and ``invoke
    lab.evaluate`` — and verifies the archives with our verifier, ``sha256sum -c``,
    ``signify-openbsd -V`` and ``minisign -V``. Needs Docker and root; the first build takes
    about 4 minutes."""
    session.install("-e", ".[dev]")
    session.run("make", "-C", "native", external=True)
    session.run("invoke", "lab.build")
    session.run("pytest", "-ra", "tests/e2e", *session.posargs)


@nox.session(python=PYTHON)
def repro(session: nox.Session) -> None:
    """Build the lab image twice from a clean cache (--no-cache) and compare: the client
    binary's SHA-256 and the package manifest must be identical; image IDs are reported with
    the layers that differ. Needs Docker and root; about 5 minutes. Not a default session."""
    session.install("-e", ".[dev]")
    session.run("invoke", "image.repro", *session.posargs)
