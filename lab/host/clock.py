"""Timestamps, with the clock they come from named beside them in every record."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def now_rfc3339() -> str:
    """Wall-clock (CLOCK_REALTIME) time in RFC 3339, microseconds, UTC."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def epoch_to_rfc3339(epoch: float, timespec: str = "seconds") -> str:
    """``timespec="microseconds"``: the precision of :func:`now_rfc3339`, for a pair of
    times (a run's start and finish) that must share one."""
    stamp = datetime.fromtimestamp(epoch, UTC).isoformat(timespec=timespec)
    return stamp.replace("+00:00", "Z")


def source_date_epoch(default: float | None = None) -> int:
    """``SOURCE_DATE_EPOCH`` when set (reproducible builds convention), else ``default``."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is not None and value.strip().isdigit():
        return int(value)
    return int(default if default is not None else time.time())


#: the run's one time base: every timeline row's ``t_ns`` is on it (the receiver's
#: ``mono_ns`` and bpftrace's ``nsecs`` already are; epoch times are converted)
TIME_BASE = "CLOCK_MONOTONIC"


@dataclass(frozen=True)
class ClockOffset:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC, measured once: ``offset_ns`` is the realtime
    reading minus the midpoint of the two monotonic readings that bracket it, and
    ``uncertainty_ns`` half that bracket (the tightest of several tries)."""

    offset_ns: int
    uncertainty_ns: int
    #: when it was measured, on the time base
    at_ns: int

    def to_dict(self) -> dict[str, int]:
        return {
            "offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "at_ns": self.at_ns,
        }

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> ClockOffset:
        return ClockOffset(int(raw["offset_ns"]), int(raw["uncertainty_ns"]), int(raw["at_ns"]))


def measure_offset(tries: int = 32) -> ClockOffset:
    """The realtime↔monotonic offset from the tightest of ``tries`` brackets
    (monotonic, realtime, monotonic) read back to back."""
    best: tuple[int, int, int] | None = None
    for _ in range(max(1, tries)):
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or after - before < best[2] - best[0]:
            best = (before, real, after)
    assert best is not None
    before, real, after = best
    middle = (before + after) // 2
    return ClockOffset(real - middle, (after - before + 1) // 2, middle)
