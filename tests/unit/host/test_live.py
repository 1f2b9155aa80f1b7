"""lab.host.live: a stage stops only the processes started within its scope (issue 23: a
snapshot judged beside a running agent stopped the agent with every other process)."""

from __future__ import annotations

import concurrent.futures as cf
import contextvars
import signal
import threading

from lab.host import procs
from lab.host.procs import Background


def test_stop_all_in_a_scope_spares_what_runs_beside_it() -> None:
    beside = Background(["sleep", "60"], purpose="the agent")
    beside.__enter__()
    result: dict[str, list[str]] = {}

    def stage() -> None:  # another thread, as the plateau watch judges a snapshot
        with procs.process_scope() as scope:
            mine = Background(["sleep", "60"], purpose="a pass of the judgement")
            mine.__enter__()
            assert set(procs.live_processes(scope).values()) == {"a pass of the judgement"}
            result["stopped"] = procs.stop_all(grace_s=0.2, scope=scope)
            result["killed"] = [str(mine.stop().killed_by_signal)]

    try:
        thread = threading.Thread(target=stage)
        thread.start()
        thread.join(30)
        assert result["stopped"] == ["a pass of the judgement"]
        assert result["killed"] == [str(signal.SIGTERM)]
        assert beside.alive(), "stopping the stage's processes stopped the agent too"
    finally:
        assert beside.stop().killed_by_signal == signal.SIGINT


def test_workers_given_the_context_start_processes_in_the_scope() -> None:
    with procs.process_scope() as outer, procs.process_scope() as inner:
        started: list[Background] = []

        def work(_: int) -> None:
            helper = Background(["sleep", "60"], purpose="a pass")
            helper.__enter__()
            started.append(helper)

        with cf.ThreadPoolExecutor(max_workers=2) as pool:
            # copied on this thread, as lab.run.schedule.run_ordered does
            futures = [pool.submit(contextvars.copy_context().run, work, i) for i in range(2)]
            for future in futures:
                future.result()
        try:
            assert sorted(procs.live_processes(inner).values()) == ["a pass", "a pass"]
            # a scope holds what its nested scopes started
            assert procs.live_processes(outer) == procs.live_processes(inner)
        finally:
            for helper in started:
                helper.stop()
    assert procs.live_processes() == {}
