"""One module per external tool. ``process_collector(name)`` returns the class for a process
collector that wraps the client (strace, perf); ``session_collector(name)`` the class for one
attached once per pass or for several passes (bpftrace). They are imported lazily so that a
broken tool module only makes its own collector unavailable, with the reason."""

from __future__ import annotations

import importlib

from lab.collectors.base import ProcessCollector, SessionCollector
from lab.model import PROCESS_COLLECTORS

_WRAPPERS = {
    "strace": ("lab.collectors.strace", "StraceCollector"),
    "perf": ("lab.collectors.perf", "PerfCollector"),
}
_SESSIONS = {
    "bpftrace": ("lab.collectors.bpftrace", "BpftraceSession"),
}


def is_session(name: str) -> bool:
    return name in _SESSIONS


def process_collector(name: str) -> type[ProcessCollector]:
    if name not in PROCESS_COLLECTORS or name not in _WRAPPERS:
        raise KeyError(name)
    module, cls = _WRAPPERS[name]
    found: type[ProcessCollector] = getattr(importlib.import_module(module), cls)
    return found


def session_collector(name: str) -> type[SessionCollector]:
    module, cls = _SESSIONS[name]
    found: type[SessionCollector] = getattr(importlib.import_module(module), cls)
    return found
