from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT, require

if TYPE_CHECKING:
    from lab.sandbox import Sandbox


@pytest.fixture(scope="session")
def client() -> Path:
    """The seeded client, built once per test session with ``make -C native``."""
    require(
        "cc",
        shutil.which("make") is not None and shutil.which("cc") is not None,
        "make or a C compiler is missing (apt-get install gcc make libssl-dev)",
    )
    subprocess.run(["make", "-C", str(ROOT / "native")], check=True, capture_output=True)
    return ROOT / "native" / "backup-client"


@pytest.fixture(scope="session")
def sandbox_ready() -> None:
    """The sandbox works here (proven by running /bin/true through the whole jail)."""
    from lab.sandbox.probe import probe

    status = probe()
    require("sandbox", status.available, status.reason)


@pytest.fixture
def sandbox(sandbox_ready: None) -> Iterator[Sandbox]:
    """A run's sandbox of its own (client users, run cgroup), closed after the test."""
    from lab.sandbox import Sandbox

    opened = Sandbox.open(f"test-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        yield opened
    finally:
        opened.close()
