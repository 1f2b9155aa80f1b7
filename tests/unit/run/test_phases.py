"""``lab.run.phases`` without a machine: a fake sandbox (cgroups are counters), a fake
bpftrace session and a fake runner, to pin down what a shared bpftrace phase promises: one
session for the batch, every reservation released, each pass given its own invocations'
outputs by cgroup id (never another pass's), a session that cannot start failing every
pass it would have served, and no session at all for a batch whose units are all skipped."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, cast

import pytest

from lab.collectors.base import CollectorOutput, SessionContext
from lab.errors import CollectorError
from lab.model import Invocation, Pass, ScenarioResult
from lab.run import phases
from lab.run.schedule import Spans
from lab.workloads.backup.scenario import Scenario


class FakeGroup:
    def __init__(self, cid: int) -> None:
        self.id = cid
        self.v2 = Path(f"/cg/{cid}")
        self.removed = False

    def kill(self) -> None:
        pass

    def remove(self) -> None:
        self.removed = True


class FakeSandbox:
    def __init__(self, tmp: Path) -> None:
        self.next_id = 100
        self.reserved: list[Any] = []
        self.groups: list[FakeGroup] = []
        self.client = tmp / "shared-client"
        self.slot_users = [object()]

    def reserve(self, tag: str, *, invocations: int) -> Any:
        from lab.sandbox import Reservation

        groups = {}
        for k in range(1, invocations + 1):
            self.next_id += 1
            groups[k] = FakeGroup(self.next_id)
            self.groups.append(groups[k])
        held = Reservation(tag, cast(Any, groups))
        self.reserved.append(held)
        return held

    def shared_client(self, client: Path) -> Path:
        return self.client


class FakeSession:
    started: ClassVar[list[SessionContext]] = []
    fail: ClassVar[bool] = False
    attach_s: ClassVar[float] = 0.0
    starts: ClassVar[list[float]] = []
    stops: ClassVar[list[float]] = []

    def __init__(self, *, scope: str) -> None:
        self.scope = scope
        self.ctx: SessionContext | None = None

    def start(self, ctx: SessionContext) -> None:
        FakeSession.starts.append(time.monotonic())
        time.sleep(FakeSession.attach_s)
        if FakeSession.fail:
            raise CollectorError("bpftrace could not attach its probes: no BTF.")
        self.ctx = ctx
        FakeSession.started.append(ctx)

    def stop_by_cgroup(self) -> dict[int, CollectorOutput]:
        FakeSession.stops.append(time.monotonic())
        if self.ctx is None:
            return {}
        return {
            w.cgroup_id or -1: CollectorOutput("bpftrace", None, [f"cg{w.cgroup_id}"])
            for w in self.ctx.windows
        }


class FakeRunner:
    def __init__(self, tmp: Path, skipping: dict[str, str] | None = None) -> None:
        self.plan = SimpleNamespace(client=tmp / "client", passes=["none", "bpftrace"], jobs=1)
        self.run_dir = tmp
        self.sandbox = FakeSandbox(tmp)
        self.log = None
        self.skipping = skipping or {}
        self.lines: list[str] = []
        self.progress = self.lines.append
        self.slots: list[Any] = []
        self.spans = Spans()
        self.on_result = None

    def abort(self) -> None:
        pass

    def run_unit_pass(
        self, scenario: Scenario, rep: int, collector_name: str, *, shared: Any = None
    ) -> Pass:
        self.slots.append(shared)
        p = Pass(collector=collector_name, invocations=[], receiver_address="", decoy_address="")
        if scenario.name in self.skipping:
            p.skipped = self.skipping[scenario.name]
            return p
        if shared is not None:
            shared.reservation.taken = True  # the cell took the groups over
            p.session = shared.record
            p.error = shared.error
        if p.error is None:
            for k in range(1, scenario.invocations + 1):
                p.invocations.append(cast(Invocation, SimpleNamespace(index=k)))
        return p

    def attach_outputs(self, p: Pass, sessions: dict[str, Any]) -> None:
        p.skipped = "attached: " + ",".join(
            f"{k}={v.artifacts[0]}" for k, v in sorted(sessions["bpftrace"].items())
        )

    def base_dir(self, scenario: Scenario, rep: int) -> Path:
        return self.run_dir / scenario.name / f"r{rep}"

    def new_result(self, scenario: Scenario, rep: int) -> ScenarioResult:
        return ScenarioResult(scenario.name, rep, "", "", passes=[])

    def finish_result(self, result: ScenarioResult) -> None:
        pass


def _units(*names: str) -> list[tuple[Scenario, int]]:
    return [
        (
            cast(
                Scenario, SimpleNamespace(name=n, invocations=2, expected_client_wall_s=lambda: 0)
            ),
            1,
        )
        for n in names
    ]


def _into(passes: list[list[Pass]]) -> Any:
    """The ``landed`` callback: each pass appended to its unit's list."""
    return lambda index, p: passes[index].append(p)


def _shared_batch(runner: Any, units: Any, batch: list[int], landed: Any) -> None:
    """One shared batch from attach to complete, as ``run_phased`` drives it."""
    shared = phases.SharedBatch(runner, units, batch, landed)
    try:
        shared.attach()
        shared.run()
        shared.complete()
    finally:
        shared.close()


@pytest.fixture(autouse=True)
def fake_session(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeSession.started, FakeSession.fail, FakeSession.attach_s = [], False, 0.0
    FakeSession.starts, FakeSession.stops = [], []
    monkeypatch.setattr(phases, "BpftraceSession", FakeSession)


def test_one_session_serves_the_batch_and_each_pass_gets_its_own_cgroups(tmp_path: Path) -> None:
    runner = FakeRunner(tmp_path)
    units = _units("alpha", "beta")
    passes: list[list[Pass]] = [[], []]
    _shared_batch(cast(Any, runner), units, [0, 1], _into(passes))
    [ctx] = FakeSession.started
    assert [w.cgroup_id for w in ctx.windows] == [101, 102, 103, 104]
    assert ctx.client_path == runner.sandbox.client
    assert ctx.out_dir == tmp_path / "sessions" / "bpftrace-1"
    alpha, beta = passes[0][0], passes[1][0]
    assert alpha.session is beta.session and alpha.session is not None
    assert (alpha.session.passes, alpha.session.invocations) == (2, 4)
    assert alpha.skipped == "attached: 1=cg101,2=cg102"
    assert beta.skipped == "attached: 1=cg103,2=cg104"
    # taken over by the cells, which remove them when they close: not removed twice
    assert all(held.taken for held in runner.sandbox.reserved)
    assert not any(group.removed for group in runner.sandbox.groups)


def test_a_session_that_cannot_start_fails_every_pass_and_frees_their_cgroups(
    tmp_path: Path,
) -> None:
    FakeSession.fail = True
    runner = FakeRunner(tmp_path)
    passes: list[list[Pass]] = [[], []]
    _shared_batch(cast(Any, runner), _units("alpha", "beta"), [0, 1], _into(passes))
    for ran in (passes[0][0], passes[1][0]):
        assert ran.error is not None and ran.error.startswith("bpftrace could not start:")
        assert ran.session is not None and ran.session.attach_s is None
        assert ran.invocations == []
    assert any("could not start" in line for line in runner.lines)


def test_skipped_units_get_no_cgroups_and_an_all_skipped_batch_no_session(
    tmp_path: Path,
) -> None:
    runner = FakeRunner(tmp_path, skipping={"alpha": "skipped: timed out"})
    passes: list[list[Pass]] = [[], []]
    _shared_batch(cast(Any, runner), _units("alpha", "beta"), [0, 1], _into(passes))
    assert passes[0][0].skipped == "skipped: timed out" and runner.slots[0] is None
    [ctx] = FakeSession.started
    assert len(ctx.windows) == 2  # beta's only

    FakeSession.started = []
    runner = FakeRunner(tmp_path / "two", skipping={"alpha": "x", "beta": "y"})
    passes = [[], []]
    _shared_batch(cast(Any, runner), _units("alpha", "beta"), [0, 1], _into(passes))
    assert FakeSession.started == [] and not (tmp_path / "two" / "sessions").exists()
    assert [p[0].skipped for p in passes] == ["x", "y"]


def test_a_reservation_no_cell_took_is_removed(tmp_path: Path) -> None:
    runner = FakeRunner(tmp_path)

    def interrupted(*args: Any, **kwargs: Any) -> Pass:
        raise KeyboardInterrupt

    runner.run_unit_pass = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        _shared_batch(cast(Any, runner), _units("alpha", "beta"), [0, 1], _into([[], []]))
    assert len(runner.sandbox.groups) == 4
    assert all(group.removed for group in runner.sandbox.groups)


def test_the_session_attaches_during_the_phase_before_and_stops_during_the_phase_after(
    tmp_path: Path,
) -> None:
    FakeSession.attach_s = 0.2
    runner = FakeRunner(tmp_path)
    runner.plan.passes = ["none", "bpftrace", "perf"]
    spans: dict[str, list[float]] = {}
    plain = runner.run_unit_pass

    def timed(scenario: Scenario, rep: int, collector_name: str, *, shared: Any = None) -> Pass:
        spans.setdefault(collector_name, []).append(time.monotonic())
        time.sleep(0.05)
        p = plain(scenario, rep, collector_name, shared=shared)
        spans[collector_name].append(time.monotonic())
        return p

    runner.run_unit_pass = timed  # type: ignore[method-assign]
    runner.new_result = lambda s, r: ScenarioResult(s.name, r, "", "", passes=[])  # type: ignore[method-assign]
    results = phases.run_phased(cast(Any, runner), _units("alpha", "beta"))
    [start], [stop] = FakeSession.starts, FakeSession.stops
    assert start < max(spans["none"])  # attaching while the untraced passes ran
    assert stop < max(spans["perf"])  # stopping while the perf passes ran
    for r in results:  # every unit's passes in phase order, bpftrace's outputs attached
        assert [p.collector for p in r.passes] == ["none", "bpftrace", "perf"]
        assert r.passes[1].skipped is not None and r.passes[1].skipped.startswith("attached:")
    assert all(held.taken for held in runner.sandbox.reserved)
