"""A repetition's outcome: the verified result, never the agent's own exit status."""

from __future__ import annotations

import pytest

from lab.campaign.outcome import after_judging, before_judging, speed_met
from lab.campaign.task import SpeedGoal
from lab.model.campaign import AgentRecord, PatchRecord


def agent(
    exit_status: int | None = 0, *, timed_out: bool = False, error: str | None = None
) -> AgentRecord:
    return AgentRecord(
        exit_status=exit_status,
        timed_out=timed_out,
        duration_s=1.0,
        lingering_count=0,
        contained=True,
        sandbox_error=error,
        stdout_bytes=0,
        stderr_bytes=0,
    )


def patch(*, empty: bool = False, problem: str | None = None) -> PatchRecord:
    return PatchRecord(
        sha256="0" * 64,
        bytes=0 if empty else 10,
        files_changed=() if empty else ("native/main.c",),
        outside_native=(),
        native_empty=empty,
        final_commit=None,
        bundle_sha256=None,
        problem=problem,
    )


@pytest.mark.parametrize(
    ("who", "what", "outcome"),
    [
        (agent(timed_out=True, exit_status=None), patch(), "timed-out"),
        (agent(error="the sandbox failed"), patch(), "agent-crashed"),
        (agent(), patch(problem="too large"), "failed"),
        (agent(), patch(empty=True), "no-change"),
        (agent(3), patch(empty=True), "agent-crashed"),
    ],
)
def test_what_is_decided_before_judging(who: AgentRecord, what: PatchRecord, outcome: str) -> None:
    decided = before_judging(who, what, budget_s=60)
    assert decided is not None and decided[0] == outcome


def test_a_change_is_judged() -> None:
    assert before_judging(agent(), patch(), budget_s=60) is None
    assert before_judging(agent(1), patch(), budget_s=60) is None  # a crash with a change too


GOAL = SpeedGoal(metric="first_backup_wall", max_ratio=0.7, size=8 << 20)


@pytest.mark.parametrize(
    ("who", "failed", "speed", "ratio", "outcome"),
    [
        (agent(), {}, None, 1.2, "met"),
        (agent(), {}, GOAL, 0.6, "met"),
        (agent(), {}, GOAL, 0.9, "failed"),
        (agent(), {}, GOAL, None, "failed"),  # a goal without a timing is not met
        (agent(), {"C3": "fail"}, None, 0.5, "failed"),
        (agent(1), {}, None, 1.0, "met"),  # the verified result wins over the agent's exit
        (agent(1), {"C1": "fail"}, None, 1.0, "agent-crashed"),
    ],
)
def test_what_the_judgement_decides(
    who: AgentRecord,
    failed: dict[str, str],
    speed: SpeedGoal | None,
    ratio: float | None,
    outcome: str,
) -> None:
    decided, why = after_judging(who, failed, speed, ratio)
    assert decided == outcome
    if failed:
        assert all(c in why for c in failed)


def test_the_speed_goal() -> None:
    assert speed_met(None, 2.0) is None
    assert speed_met(GOAL, 0.7) is True and speed_met(GOAL, 0.71) is False
    assert "speed goal missed: 0.90× > 0.7×" in after_judging(agent(), {}, GOAL, 0.9)[1]
    assert "exited 1" in after_judging(agent(1), {}, None, 1.0)[1]
