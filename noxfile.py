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
    session.run("pytest", "-ra", *(session.posargs or ["tests"]))
