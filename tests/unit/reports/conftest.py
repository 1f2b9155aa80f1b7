"""Sample runs for the report tests (built in ``reports_sample.py``)."""

from __future__ import annotations

import pytest

from lab.model import RunResult
from tests.unit.reports.reports_sample import (
    build_degraded_run,
    build_repeated_run,
    build_sample_run,
)


@pytest.fixture
def sample_run() -> RunResult:
    return build_sample_run()


@pytest.fixture
def degraded_run() -> RunResult:
    return build_degraded_run()


@pytest.fixture
def repeated_run() -> RunResult:
    return build_repeated_run()
