"""One module per external tool. ``process_collector(name)`` returns the class for a
process collector (they are imported lazily so that a broken tool module only makes its own
collector unavailable, with the reason)."""

from __future__ import annotations

import importlib

from lab.collectors.base import ProcessCollector
from lab.model import PROCESS_COLLECTORS

_MODULES = {
    "strace": ("lab.collectors.strace", "StraceCollector"),
    "bpftrace": ("lab.collectors.bpftrace", "BpftraceCollector"),
    "perf": ("lab.collectors.perf", "PerfCollector"),
}


def process_collector(name: str) -> type[ProcessCollector]:
    if name not in PROCESS_COLLECTORS:
        raise KeyError(name)
    module, cls = _MODULES[name]
    found: type[ProcessCollector] = getattr(importlib.import_module(module), cls)
    return found
