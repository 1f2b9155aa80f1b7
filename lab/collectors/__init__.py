"""One module per external tool, each named in ``lab.registry``. ``process_collector(name)``
returns the class for a process collector that wraps the client; ``session_collector(name)``
the class for one attached once per pass or for several passes. They are imported lazily so that a
broken tool module only makes its own collector unavailable, with the reason."""

from __future__ import annotations

import importlib

from lab.collectors.base import ProcessCollector, SessionCollector
from lab.registry import PROCESS_COLLECTORS, collector


def is_session(name: str) -> bool:
    return name in PROCESS_COLLECTORS and collector(name).kind == "session"


def process_collector(name: str) -> type[ProcessCollector]:
    if name not in PROCESS_COLLECTORS or collector(name).kind != "wrapper":
        raise KeyError(name)
    spec = collector(name)
    found: type[ProcessCollector] = getattr(importlib.import_module(spec.module), spec.cls)
    return found


def session_collector(name: str) -> type[SessionCollector]:
    spec = collector(name)
    if spec.kind != "session":
        raise KeyError(name)
    found: type[SessionCollector] = getattr(importlib.import_module(spec.module), spec.cls)
    return found
