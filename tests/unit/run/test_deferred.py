"""A perf pass's outputs are read at its end, each landing where the pass would have put it."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, cast

from lab.collectors.base import CollectorOutput
from lab.collectors.perf import PerfCollector
from lab.collectors.strace import StraceCollector
from lab.model import Invocation, Pass
from lab.run.deferred import Deferred, deferrable
from tests.unit.workloads.backup.test_contract import inv


class FakeTracer:
    name = "perf"

    def __init__(self, fail_on: int | None = None) -> None:
        self.fail_on = fail_on
        self.threads: set[int] = set()

    def collect(self, ctx: Any, completed: Any) -> CollectorOutput:
        self.threads.add(threading.get_ident())
        if ctx.invocation == self.fail_on:
            return CollectorOutput("perf", None, ["raw"], error="perf report printed nothing")
        return CollectorOutput("perf", None, [f"inv{ctx.invocation}/perf-report.txt"])


def _pass(*invs: Invocation) -> Pass:
    return Pass("perf", list(invs), "", "")


def test_only_perf_defers_its_collect() -> None:
    assert PerfCollector.deferrable
    assert not StraceCollector.deferrable
    assert deferrable("perf")
    assert not deferrable("strace")
    assert not deferrable("bpftrace")
    assert not deferrable("none")


def test_finish_records_every_output_and_a_failure_taints_its_pass_only() -> None:
    tracer = FakeTracer(fail_on=2)
    good, bad = _pass(inv(1), inv(2)), _pass(inv(1))
    deferred = Deferred(workers=2)
    for p in (good, bad):
        for i in p.invocations:
            ctx = SimpleNamespace(invocation=i.index if p is good else 3)
            deferred.add(cast(Any, tracer), cast(Any, ctx), cast(Any, None), p, i)
    deferred.finish()
    assert deferred.pending == []
    assert good.invocations[0].artifacts["perf"] == ["inv1/perf-report.txt"]
    assert good.error == "perf failed in invocation 2: perf report printed nothing"
    assert good.invocations[1].missing["perf"] == "perf report printed nothing"
    assert bad.error is None  # its one invocation (collected as 3) succeeded
    assert bad.invocations[0].artifacts["perf"] == ["inv3/perf-report.txt"]
