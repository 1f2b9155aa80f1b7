"""``--jobs N`` (lab.run.schedule and the runner's use of it): which passes may overlap,
results in the sequential order whatever order passes finish in, at most N at a time, the
longest started first, ``--jobs 1`` strictly sequential, every worker stopped before an
error or an interrupt leaves the pool, and a pass's ``concurrent`` flag true exactly when
another pass ran during it."""

from __future__ import annotations

import threading
import time
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from lab.model import Pass, RunResult, ScenarioResult
from lab.reports.run import concurrency_statement
from lab.run import schedule
from lab.run.plan import Plan
from lab.run.runner import Runner
from lab.run.schedule import Cancelled, Spans, decide, lead_first, run_ordered
from lab.workloads.backup.scenario import Scenario


def test_every_phase_of_a_sandboxed_seeded_client_overlaps() -> None:
    d = decide(2, sandboxed=True)
    assert (d.jobs, d.why_sequential) == (2, None)
    assert all(d.overlaps(c) for c in ("none", "strace", "bpftrace", "perf"))
    assert d.to_dict(8)["concurrent_passes"] == 8
    assert d.to_dict()["overlapping"] == ["none", "strace", "bpftrace", "perf"]
    assert d.sentence() == "passes up to 2 at a time within each phase"


def test_without_the_sandbox_passes_run_alone_and_say_why() -> None:
    d = decide(4, sandboxed=False)
    assert d.jobs == 1 and d.requested == 4
    assert d.why_sequential is not None and "--sandbox off" in d.why_sequential
    assert not d.overlaps("none")
    assert "--sandbox off" in d.sentence()


def test_jobs_1_is_sequential_with_nothing_to_explain() -> None:
    d = decide(1, sandboxed=True)
    assert (d.jobs, d.why_sequential, d.overlaps("none")) == (1, None, False)


def test_results_come_back_in_item_order_and_at_most_n_run_at_once() -> None:
    active, peak, lock = [0], [0], threading.Lock()
    finished: list[int] = []
    done_threads: set[str] = set()

    def work(item: int) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.01 * (6 - item))  # the first items finish last
        with lock:
            active[0] -= 1
        return item * 10

    def done(index: int, result: int) -> None:
        finished.append(index)
        done_threads.add(threading.current_thread().name)

    got = run_ordered(list(range(6)), work, jobs=3, done=done, abort=lambda: None)
    assert got == [0, 10, 20, 30, 40, 50]
    assert peak[0] == 3
    assert sorted(finished) == list(range(6)) and finished != list(range(6))
    # progress is reported on the caller's thread only: lines never interleave
    assert done_threads == {threading.current_thread().name}


def test_the_costliest_items_start_first_and_results_keep_the_item_order() -> None:
    started: list[str] = []

    def work(item: str) -> str:
        started.append(item)
        return item.upper()

    items = ["short", "longest", "none", "long"]
    cost = {"short": 0.1, "longest": 0.6, "none": 0.0, "long": 0.3}
    got = run_ordered(items, work, jobs=1, done=lambda i, r: None, abort=lambda: None,
                      first=lambda item: -cost[item])  # fmt: skip
    assert started == ["longest", "long", "short", "none"]
    assert got == ["SHORT", "LONGEST", "NONE", "LONG"]


def test_a_span_is_concurrent_exactly_when_another_ran_during_it() -> None:
    spans = Spans()
    first = spans.begin()
    assert spans.end(first) is False  # alone
    a = spans.begin()
    b = spans.begin()
    assert spans.end(b) is True  # a was running
    time.sleep(0.002)
    c = spans.begin()  # begins after b ended, while a still runs
    assert spans.end(a) is True
    assert spans.end(c) is True  # overlapped a's end
    d = spans.begin()
    assert spans.end(d) is False  # every other span had ended before it began


def test_one_job_runs_items_one_after_another_in_order() -> None:
    spans: list[tuple[int, float, float]] = []

    def work(item: int) -> int:
        t0 = time.monotonic()
        time.sleep(0.005)
        spans.append((item, t0, time.monotonic()))
        return item

    assert run_ordered([3, 1, 2], work, jobs=1, done=lambda i, r: None, abort=lambda: None) == [
        3,
        1,
        2,
    ]
    assert [s[0] for s in spans] == [3, 1, 2]
    assert all(a[2] <= b[1] for a, b in pairwise(spans))


def _stoppable() -> tuple[threading.Event, list[int], list[int], Any]:
    stop = threading.Event()
    started: list[int] = []
    returned: list[int] = []

    def work(item: int) -> int:
        if item == 0:
            raise RuntimeError("pass failed")
        started.append(item)
        stop.wait(10)  # a pass that only ends when the run stops it
        returned.append(item)
        if stop.is_set():
            raise Cancelled("stopping")
        return item

    return stop, started, returned, work


def test_an_error_stops_every_other_worker_before_it_propagates() -> None:
    stop, started, returned, work = _stoppable()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="pass failed"):
        run_ordered([1, 0, 2], work, jobs=3, done=lambda i, r: None, abort=stop.set)
    # every pass that had started returned before the error left the pool (one not yet
    # started is cancelled), and none waited for its own end
    assert started and sorted(returned) == sorted(started)
    assert time.monotonic() - t0 < 5


def test_an_interrupt_on_the_main_thread_stops_every_worker_then_propagates() -> None:
    stop, started, returned, work = _stoppable()
    calls: list[int] = []

    def done(index: int, result: int) -> None:
        raise KeyboardInterrupt  # Ctrl-C arriving while the caller reports progress

    def abort() -> None:
        calls.append(1)
        stop.set()

    items = [5, 1, 2]

    def quick_first(item: int) -> int:
        return item if item == 5 else work(item)

    with pytest.raises(KeyboardInterrupt):
        run_ordered(items, quick_first, jobs=3, done=done, abort=abort)
    assert calls and sorted(returned) == sorted(started)


# -- the runner: the passes of each phase overlap, phases one after another, order kept -----


def _scenario(name: str, wall_s: float = 0.0) -> Scenario:
    return cast(
        Scenario,
        SimpleNamespace(
            name=name,
            description=name,
            path=Path(f"{name}.yaml"),
            expected_client_wall_s=lambda: wall_s,
        ),
    )


def _runner(
    tmp_path: Path,
    jobs: int,
    passes: list[str],
    *,
    starts_client: bool = True,
    longest: str | None = None,
    setup_s: float = 0.0,
) -> tuple[Runner, list[Any]]:
    """A runner whose passes are stand-ins: each sets up for ``setup_s``, then says its
    client runs (``starts_client``), as supervise does, then sleeps; ``longest``: the
    scenario whose expectations promise the longest client."""
    names = ("alpha", "beta", "gamma", "delta")
    scenarios = [_scenario(n, 1.0 if n == longest else 0.0) for n in names]
    client = tmp_path / "client"
    client.write_bytes(b"#!/bin/sh\n")
    plan = Plan(scenarios=scenarios, passes=passes, packets="off", client=client, jobs=jobs)
    runner = Runner(plan, tmp_path, observers={}, sandbox=None)
    events: list[Any] = []
    lock = threading.Lock()

    def run_pass(
        s: Scenario, rep: int, collector: str, base: Path, seed: str, *, shared: Any = None
    ) -> Pass:
        t0 = time.monotonic()
        time.sleep(setup_s)
        if starts_client:
            runner.client_started()
        # later scenarios finish first, so completion order differs from plan order
        time.sleep({"alpha": 0.04, "beta": 0.03, "gamma": 0.02, "delta": 0.01}[s.name])
        with lock:
            events.append((s.name, collector, t0, time.monotonic()))
        return Pass(
            collector=collector,
            invocations=[],
            receiver_address="",
            decoy_address="",
            wall_s=time.monotonic() - t0,
        )

    runner.run_pass = run_pass  # type: ignore[method-assign]
    return runner, events


def test_overlapping_keeps_the_sequential_order_and_runs_phase_after_phase(
    tmp_path: Path,
) -> None:
    runner, events = _runner(tmp_path, 2, ["none", "strace"])
    finished: list[tuple[str, list[str]]] = []
    runner.on_result = lambda r: finished.append((r.name, [p.collector for p in r.passes]))
    results = runner.run()
    assert [r.name for r in results] == ["alpha", "beta", "gamma", "delta"]
    assert all([p.collector for p in r.passes] == ["none", "strace"] for r in results)
    assert all(p.concurrent for r in results for p in r.passes)
    untraced = [e for e in events if e[1] == "none"]
    traced = [e for e in events if e[1] == "strace"]
    for phase in (untraced, traced):
        assert max(e[2] for e in phase) < max(e[3] for e in phase)  # they did overlap
    # a phase begins once the one before has ended
    assert min(e[2] for e in traced) >= max(e[3] for e in untraced)
    # each scenario repetition is handed on as soon as its last pass landed, whole
    names = ("alpha", "beta", "gamma", "delta")
    assert sorted(finished) == sorted((n, ["none", "strace"]) for n in names)
    assert [n for n, _ in finished] != ["alpha", "beta", "gamma", "delta"]  # the fast first
    assert all(r.wall_s == pytest.approx(sum(p.wall_s for p in r.passes)) for r in results)


def test_jobs_1_runs_scenario_after_scenario_as_before(tmp_path: Path) -> None:
    runner, events = _runner(tmp_path, 1, ["none", "strace"])
    results = runner.run()
    assert [(e[0], e[1]) for e in events] == [
        (s, c) for s in ("alpha", "beta", "gamma", "delta") for c in ("none", "strace")
    ]
    assert all(a[3] <= b[2] for a, b in pairwise(events))
    assert not any(p.concurrent for r in results for p in r.passes)


def test_what_runs_beside_the_passes_begins_once_as_the_first_client_runs(
    tmp_path: Path,
) -> None:
    """Not as the first pass begins: its set-up (namespace, endpoints, jail) holds the
    interpreter lock and would wait for the tool versions and the imports for the end."""
    runner, events = _runner(tmp_path, 3, ["none"], starts_client=False)
    begun: list[int] = []
    once = threading.Event()
    watching = threading.Event()

    def beside() -> None:
        watching.wait(5)  # begun on a thread of its own: a client's watch is not held up
        begun.append(len(events))
        once.set()

    runner.on_start = beside
    runner.run()
    assert len(events) == 4 and begun == []  # no client ran (run_pass is a stand-in)
    clients = [threading.Thread(target=runner.client_started) for _ in range(8)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(2)
    assert not any(thread.is_alive() for thread in clients)
    watching.set()
    assert once.wait(5)
    runner.client_started()
    time.sleep(0.05)
    assert begun == [4]


def test_a_phases_longest_pass_sets_up_alone_until_its_client_runs(tmp_path: Path) -> None:
    runner, events = _runner(tmp_path, 3, ["none", "strace"], longest="gamma", setup_s=0.05)
    ran: list[tuple[str, float]] = []
    said = runner.client_started

    def client_started() -> None:
        ran.append((threading.current_thread().name, time.monotonic()))
        said()

    runner.client_started = client_started  # type: ignore[method-assign]
    results = runner.run()
    assert [r.name for r in results] == ["alpha", "beta", "gamma", "delta"]
    for collector in ("none", "strace"):  # in every phase
        phase = [e for e in events if e[1] == collector]
        lead = next(e for e in phase if e[0] == "gamma")
        assert lead[2] == min(e[2] for e in phase)  # the longest began first
        lead_client = lead[2] + 0.05
        others = [e for e in phase if e[0] != "gamma"]
        # ... and alone: the others began once its client ran, and beside it
        assert all(e[2] >= lead_client - 0.005 for e in others)
        assert min(e[2] for e in others) < lead[3]
    assert all(p.concurrent for r in results for p in r.passes if r.name != "alpha")


def test_the_others_go_on_when_the_longest_pass_ends_without_a_client(tmp_path: Path) -> None:
    runner, events = _runner(tmp_path, 2, ["none"], starts_client=False, longest="beta")
    runner.run()
    lead = next(e for e in events if e[0] == "beta")
    assert all(e[2] >= lead[3] for e in events if e[0] != "beta")


def test_the_others_go_on_when_the_longest_pass_fails(tmp_path: Path) -> None:
    started: list[str] = []

    def work(item: str) -> str:
        started.append(item)
        if item == "lead":
            raise RuntimeError("set-up failed")
        return item

    with pytest.raises(RuntimeError, match="set-up failed"):
        run_ordered(["a", "lead"], lead_first(work, "lead"), jobs=2, done=lambda i, r: None,
                    abort=lambda: None, first=lambda item: item != "lead")  # fmt: skip
    assert started[0] == "lead"


def test_the_wait_for_the_longest_pass_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "LEAD_WAIT_S", 0.05)
    began: dict[str, float] = {}
    release = threading.Event()

    def work(item: str) -> str:
        began[item] = time.monotonic()
        if item == "lead":
            release.wait(5)  # a set-up that never reaches its client
        return item

    t0 = time.monotonic()
    thread = threading.Thread(
        target=run_ordered,
        args=(["lead", "b"], lead_first(work, "lead")),
        kwargs={"jobs": 2, "done": lambda i, r: None, "abort": lambda: None},
    )
    thread.start()
    deadline = time.monotonic() + 5
    while "b" not in began and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    thread.join(5)
    assert 0.04 <= began["b"] - t0 < 2.0


def test_only_the_longest_passes_client_lets_the_others_go_on() -> None:
    order: list[str] = []

    def work(item: str) -> str:
        if item == "lead":
            time.sleep(0.05)
            order.append("lead client")
            schedule.client_running()
            time.sleep(0.05)
        else:
            order.append(item)
            schedule.client_running()  # another pass's client: changes nothing
        return item

    run_ordered(["a", "b", "lead"], lead_first(work, "lead"), jobs=3, done=lambda i, r: None,
                abort=lambda: None, first=lambda item: item != "lead")  # fmt: skip
    assert order[0] == "lead client" and sorted(order[1:]) == ["a", "b"]
    schedule.client_running()  # outside any phase: nothing to let go on


def _run(passes: list[list[Pass]], concurrency: dict[str, Any] | None) -> RunResult:
    scenarios = [
        ScenarioResult(
            name=f"s{i}", repetition=1, description="", scenario_file="", passes=list(ps)
        )
        for i, ps in enumerate(passes)
    ]
    return RunResult(
        run_id="run-x",
        started_at="",
        finished_at="",
        options={},
        observers={},
        environment={},
        scenarios=scenarios,
        concurrency=concurrency,
    )


def _pass(collector: str, concurrent: bool) -> Pass:
    return Pass(
        collector=collector,
        invocations=[],
        receiver_address="",
        decoy_address="",
        concurrent=concurrent,
    )


def test_the_report_says_which_passes_ran_beside_another() -> None:
    record = decide(2, sandboxed=True).to_dict(2)
    run = _run([[_pass("none", True), _pass("strace", False)], [_pass("none", True)]], record)
    text = concurrency_statement(run)
    assert "2 passes ran beside another pass, up to 2 at a time (--jobs 2)" in text
    assert "s0 r1 (none), s1 r1 (none)" in text or "s0 (none), s1 (none)" in text
    assert "phase by phase" in text and "timing rounds always run alone" in text
    one = _run([[_pass("none", True)], [_pass("none", False)]], record)
    assert "s0 (none)" in concurrency_statement(one)
    # many passes are counted per collector; a record of a run made before traced passes
    # could overlap keeps its own rule
    many = [[_pass("none", True), _pass("strace", True)] for _ in range(4)]
    many[3][1].concurrent = False
    text = concurrency_statement(_run(many, record))
    assert "all 4 untraced passes, 3 of 4 strace passes" in text
    old = {**record, "overlapping": ["none"]}
    assert "Traced passes, passes with a packet capture" in concurrency_statement(_run(many, old))


def test_the_report_says_why_a_run_stayed_sequential() -> None:
    record = decide(2, sandboxed=False).to_dict()
    text = concurrency_statement(_run([[_pass("none", False)]], record))
    assert text.startswith("one pass at a time (--sandbox off")
    assert concurrency_statement(_run([[_pass("none", False)]], None)) == "one pass at a time"


@pytest.mark.parametrize("jobs", [0, -1, 65])
def test_a_jobs_count_out_of_range_is_refused_before_anything_is_written(
    tmp_path: Path, jobs: int
) -> None:
    from lab.errors import UsageError
    from lab.pipeline import RunRequest, execute

    client = tmp_path / "client"
    client.write_bytes(b"#!/bin/sh\n")
    client.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    request = RunRequest(names=["baseline"], out=out, client=client, jobs=jobs)
    with pytest.raises(UsageError, match=f"--jobs {jobs} must be between 1 and 64"):
        execute(request, say=lambda _m: None)
    assert list(out.iterdir()) == []


def test_the_command_line_passes_jobs_through() -> None:
    from lab._parser import build_parser

    args = build_parser().parse_args(["run", "--all", "--jobs", "3"])
    assert args.jobs == 3
    assert build_parser().parse_args(["run", "--all"]).jobs is None  # the cores, decided later


def test_overhead_figures_say_when_their_untraced_side_overlapped() -> None:
    from lab.reports.scenario import overlap_note

    overlapped = _run([[_pass("none", True), _pass("strace", False)]], None).scenarios
    alone = _run([[_pass("none", False), _pass("strace", False)]], None).scenarios
    assert "--jobs 1" in overlap_note(overlapped)[0]
    assert overlap_note(alone) == []


def test_the_report_says_how_bpftrace_attached() -> None:
    from lab.model import SharedSession
    from lab.reports.run import sessions_statement

    assert sessions_statement(_run([[_pass("none", False), _pass("strace", False)]], None)) is None
    record = SharedSession("bpftrace", "sessions/bpftrace-1", 2, 4, attach_s=0.94, stop_s=0.88)
    shared = [_pass("bpftrace", False), _pass("bpftrace", False)]
    for p in shared:
        p.session = record
    own = _pass("bpftrace", False)
    text = sessions_statement(_run([[shared[0]], [shared[1]], [own]], None)) or ""
    assert text.startswith("one bpftrace session for 2 passes (4 invocations), attached in 0.9 s")
    assert "stopped in 0.9 s" in text and "sessions/bpftrace-1/bpftrace.txt" in text
    assert text.endswith("1 bpftrace pass(es) with a session of their own")
    failed = SharedSession("bpftrace", "sessions/bpftrace-2", 1, 2)
    lone = _pass("bpftrace", False)
    lone.session = failed
    assert "could not start" in (sessions_statement(_run([[lone]], None)) or "")


def test_batches_never_exceed_the_invocation_limit() -> None:
    from lab.run.phases import batches

    units = [(cast(Scenario, SimpleNamespace(invocations=n)), 1) for n in (2, 3, 2, 5, 1)]
    assert list(batches(units, 5)) == [[0, 1], [2], [3], [4]]
    assert list(batches(units, 64)) == [[0, 1, 2, 3, 4]]
    # a unit larger than the limit is a batch of its own, never dropped
    assert list(batches(units, 4)) == [[0], [1], [2], [3], [4]]
    assert list(batches([], 4)) == []
