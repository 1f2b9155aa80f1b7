"""Shared test fixtures.

Tests that need a capability (a tool, root, a kernel feature) use ``require(...)``. On a
machine that truly lacks it they skip and say which capability is missing; when
``LAB_REQUIRE_COLLECTORS`` names it (CI sets ``strace,bpftrace,perf,packets``) or
``LAB_REQUIRE_CAPABILITIES`` does (e.g. ``docker,signify,minisign,pdftoppm``), the skip
becomes a failure, so a green CI means the capability really ran.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(__file__).resolve().parent / "assets"


def _required() -> set[str]:
    names: set[str] = set()
    for var in ("LAB_REQUIRE_COLLECTORS", "LAB_REQUIRE_CAPABILITIES"):
        names |= {n.strip() for n in os.environ.get(var, "").split(",") if n.strip()}
    return names


def require(capability: str, available: bool, reason: str | None) -> None:
    """Skip (or, when CI requires ``capability``, fail) unless ``available``."""
    if available:
        return
    message = f"{capability} unavailable on this machine: {reason}"
    if capability in _required():
        pytest.fail(f"{message} (required by LAB_REQUIRE_*)", pytrace=False)
    pytest.skip(message)


def benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` loaded as a module (the benchmarks are scripts, not a
    package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def assets() -> Path:
    return ASSETS


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every hostile test client (tests/assets/hostile/), built once per session."""
    require(
        "cc",
        shutil.which("make") is not None and shutil.which("cc") is not None,
        "make or a C compiler is missing (apt-get install gcc make libssl-dev)",
    )
    out = tmp_path_factory.mktemp("hostile")
    subprocess.run(
        ["make", "-s", "-C", str(ROOT / "tests" / "assets" / "hostile"), f"OUT={out}"],
        check=True,
        capture_output=True,
    )
    return {p.name.removeprefix("hostile-"): p for p in out.iterdir()}
