"""A repetition's outcome, decided from what the agent did and what the judgement found:
the verified result of the candidate, never the agent's own exit status or summary.

    before_judging(agent, patch, budget_s=1800)     # ("timed-out", why) or None: judge it
    after_judging(agent, failed, speed, ratio, interval)   # ("met" | "failed" | …, why)

``timed-out``: the budget ran out (the patch and bundle are kept, not judged).
``agent-crashed``: the sandbox failed, or the agent exited non-zero and its result does not
meet the task (a non-zero exit whose result *does* meet it is ``met``, with a note).
``no-change``: nothing in ``native/`` changed. ``build-failed`` is decided by the build.
"""

from __future__ import annotations

from lab.campaign.task import SpeedGoal
from lab.model.campaign import AgentRecord, Outcome, PatchRecord


def crashed(agent: AgentRecord) -> bool:
    return agent.crashed


def _said(agent: AgentRecord) -> str:
    """What the agent's stderr ended with (why it could not start, say), for the reason."""
    return "" if agent.stderr_tail is None else f"; its stderr ends: {agent.stderr_tail!r}"


def before_judging(
    agent: AgentRecord, patch: PatchRecord, *, budget_s: float
) -> tuple[Outcome, str] | None:
    """The outcome when there is nothing to judge; None when the candidate is to be built."""
    if agent.timed_out:
        return (
            "timed-out",
            f"the budget of {budget_s:g} s ran out; the whole cgroup was killed (patch and "
            "bundle kept, not judged)",
        )
    if agent.sandbox_error is not None:
        return "agent-crashed", agent.sandbox_error
    if patch.problem is not None:
        return "failed", patch.problem
    if patch.native_empty:
        if crashed(agent):
            return (
                "agent-crashed",
                f"the agent exited {agent.exit_status} and left no change to native/"
                + _said(agent),
            )
        return "no-change", "the agent left native/ as it was given"
    return None


def speed_met(
    speed: SpeedGoal | None, ratio: float | None, interval: list[float] | None
) -> bool | None:
    """None without a speed goal. A goal is met only when the ratio's whole 95 % interval
    (``lab.evaluate.interval``) is at or under ``max_ratio``: a median ratio under the goal
    whose interval reaches above it could be noise. A goal without a ratio or an interval
    (not timed, or too few rounds for one) is not met."""
    if speed is None:
        return None
    return ratio is not None and interval is not None and interval[1] <= speed.max_ratio


def _speed_missed(speed: SpeedGoal, ratio: float | None, interval: list[float] | None) -> str:
    if ratio is None:
        return (
            f"speed goal missed: {speed.metric} is N/A (not timed, or undefined: a share above "
            f"the instrument floor needs a baseline above it), not ≤ {speed.max_ratio:g}×"
        )
    if interval is None:
        return (
            f"speed goal missed: {ratio:.2f}× has no 95 % interval (too few timing rounds), "
            f"so it is not shown to be ≤ {speed.max_ratio:g}×"
        )
    return (
        f"speed goal missed: {ratio:.2f}× (95 % interval {interval[0]:.2f}×–{interval[1]:.2f}×) "
        f"is not wholly ≤ {speed.max_ratio:g}×"
    )


def after_judging(
    agent: AgentRecord,
    failed: dict[str, str],
    speed: SpeedGoal | None,
    ratio: float | None,
    interval: list[float] | None = None,
) -> tuple[Outcome, str]:
    held = speed_met(speed, ratio, interval)
    if not failed and held is not False:
        note = f" (the agent itself exited {agent.exit_status})" if crashed(agent) else ""
        goal = "" if speed is None else f" and {speed.describe()} held"
        return "met", f"every required clause passed in every evaluation repetition{goal}{note}"
    reasons = [f"{c}: {w}" for c, w in failed.items()]
    if speed is not None and held is False:
        reasons.append(_speed_missed(speed, ratio, interval))
    why = "; ".join(reasons)
    if crashed(agent):
        return (
            "agent-crashed",
            f"the agent exited {agent.exit_status}{_said(agent)}; its result: {why}",
        )
    return "failed", why
