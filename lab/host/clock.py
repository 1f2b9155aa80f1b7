"""Timestamps, with the clock they come from named beside them in every record."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def now_rfc3339() -> str:
    """Wall-clock (CLOCK_REALTIME) time in RFC 3339, microseconds, UTC."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def epoch_to_rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def source_date_epoch(default: float | None = None) -> int:
    """``SOURCE_DATE_EPOCH`` when set (reproducible builds convention), else ``default``."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is not None and value.strip().isdigit():
        return int(value)
    return int(default if default is not None else time.time())
