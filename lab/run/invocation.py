"""One invocation of the client, the parts that are not the running itself: its command line
(contract v1, plus ``--behavior`` and the scenario's arguments for the seeded client), the
fixture digest it saw, its own claim read from its stdout (JSON event lines, exit status),
the sandbox's record of it, and a collector's output filed into the model. The runner
(``lab.run.runner``) runs the invocation and calls these.

    argv = client_argv(plan, scenario, cell.client, cell.source, {"receiver": rx.address,
                                                                  "decoy": decoy.address})
    claim = parse_claim(Path("inv1/client.stdout").read_bytes(), outcome)
    claim.claimed_success, claim.completion       # exit 0 or a {"event": "complete", ...}
    record_output(inv, tracer.collect(ctx, outcome.wrapper))   # observed or missing
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.collectors.base import CollectorOutput, InvocationContext, ProcessCollector
from lab.errors import ClientError, CollectorError, LabError
from lab.model import ClientClaim, Invocation, Pass, SandboxRecord
from lab.run.plan import Plan
from lab.sandbox.gate import Attacher
from lab.sandbox.output import MARKER_PREFIX
from lab.sandbox.supervise import Outcome
from lab.workloads.backup.scenario import Scenario

#: client event lines kept in the model and the timeline: the first and the last this many
EVENTS_KEPT = 100


def current_source_digest(p: Pass, index: int) -> str:
    """The fixture digest invocation ``index`` saw (the latest change at or before it)."""
    changes = [i for i in p.source_changes if i <= index]
    return p.source_changes[max(changes)] if changes else p.source_sha256 or ""


def client_argv(
    plan: Plan, scenario: Scenario, client: Path, source: Path, addresses: dict[str, str]
) -> list[str]:
    argv = [str(client), "--source", str(source), "--receiver", addresses["receiver"]]
    if plan.client_kind == "seeded" and scenario.behavior != "candidate":
        argv += ["--behavior", scenario.behavior]
        for arg in scenario.client_args:
            for role, address in addresses.items():
                arg = arg.replace("{" + role + "}", address)
            argv.append(arg)
    return argv


def tracer_hooks(
    tracer: ProcessCollector | None, ctx: InvocationContext, *, gated: bool
) -> tuple[Callable[[list[str]], list[str]], Attacher | None]:
    """How a process collector observes one invocation, as (wrap, attach) for the cell's
    ``run``: attached at the jail's gate where it can and the cell has one (it then follows
    the client from its own execve on, not the jail's steps before it), else wrapping the
    jail's command line."""
    attach = tracer.attacher(ctx) if tracer is not None and gated else None
    if tracer is None or attach is not None:
        return _as_is, attach
    return (lambda argv: tracer.wrap(argv, ctx)), None


def _as_is(argv: list[str]) -> list[str]:
    return argv


def sandbox_problem(outcome: Outcome, index: int) -> LabError | None:
    """Why invocation ``index`` did not run its client (None: it did): its tracer never
    attached at the gate (the pass's tracer failed), or the sandbox itself failed."""
    if outcome.attach_error is not None:  # the pass's error then names the invocation
        return CollectorError(outcome.attach_error)
    if outcome.sandbox_error is not None:
        return ClientError(f"invocation {index}: {outcome.sandbox_error}")
    return None


def parse_claim(stdout: bytes, outcome: Outcome) -> ClientClaim:
    """The client's own account: its JSON event lines and exit status (contract v1)."""
    events: list[dict[str, Any]] = []
    count = 0
    unparsed = 0
    last: dict[str, Any] | None = None
    # lines end at "\n" only (docs/client-contract.md): U+2028, U+0085, a form feed or a
    # CR inside a JSON string stays inside its line (str.splitlines would split there)
    for raw in stdout.decode("utf-8", "replace").split("\n"):
        if not raw.strip() or raw.encode().startswith(MARKER_PREFIX):
            continue
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            unparsed += 1
            last = None
            continue
        if not isinstance(obj, dict):
            unparsed += 1
            last = None
            continue
        count += 1
        last = obj
        if len(events) < 2 * EVENTS_KEPT:
            events.append(obj)
        else:
            events[EVENTS_KEPT:] = [*events[EVENTS_KEPT + 1 :], obj]
    completion = last if last is not None and last.get("event") == "complete" else None
    said_ok = completion is not None and completion.get("status") == "ok"
    status = outcome.exit_status
    omitted = outcome.stdout.omitted_lines if outcome.stdout is not None else 0
    return ClientClaim(
        exit_status=status,
        claimed_success=(status == 0) or said_ok,
        completion=completion,
        events=events,
        unparsed_lines=unparsed,
        timed_out=outcome.timed_out,
        killed_by_signal=9 if outcome.timed_out else None,
        wall_s=outcome.wall_s,
        cpu_s=outcome.cpu_s,
        event_count=count,
        omitted_lines=omitted,
    )


def claim_lines(outcome: Outcome) -> list[tuple[int, int, dict[str, Any]]]:
    """The client's event lines with the time the lab read each one (CLOCK_MONOTONIC ns):
    (line number from 0, time, the event). Bounded like the stream's timed lines."""
    found: list[tuple[int, int, dict[str, Any]]] = []
    timed = outcome.stdout.line_times if outcome.stdout is not None else ()
    for number, read_ns, raw in timed:
        try:
            obj = json.loads(raw.decode("utf-8", "replace"))
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(obj, dict):
            found.append((number, read_ns, obj))
    return found


def sandbox_record(outcome: Outcome, cell: Any, index: int) -> SandboxRecord:
    group = cell.group(index)
    return SandboxRecord(
        enabled=group is not None,
        cgroup=group.name if group is not None else None,
        cgroup_id=group.id if group is not None else None,
        main_pid=outcome.main_pid,
        lingering=list(outcome.lingering),
        lingering_count=outcome.lingering_count,
        lingering_killed=outcome.lingering_killed,
        contained=outcome.contained,
        stats=outcome.stats,
        stdout=outcome.stdout.to_dict() if outcome.stdout is not None else {},
        stderr=outcome.stderr.to_dict() if outcome.stderr is not None else {},
        error=outcome.sandbox_error,
        disk={k: None if v is None else v.to_dict() for k, v in outcome.disk.items()},
        refused=None if outcome.refused is None else outcome.refused.to_dict(),
    )


def record_output(inv: Invocation, out: CollectorOutput) -> None:
    if out.artifacts:
        inv.artifacts[out.name] = sorted(set(inv.artifacts.get(out.name, []) + out.artifacts))
    if out.summary is not None and out.error is None:
        inv.observed.add(out.summary)
        inv.missing.pop(out.name, None)
    else:
        inv.missing[out.name] = out.error or f"{out.name} produced no summary"


def attach_outputs(p: Pass, sessions: dict[str, dict[int, CollectorOutput] | str]) -> None:
    """File a pass's session collectors' outputs (the capture, bpftrace) into its
    invocations; a session that did not run, or recorded nothing for one, is missing there."""
    for inv in p.invocations:
        for name, outputs in sessions.items():
            if isinstance(outputs, str):
                inv.missing[name] = outputs
                continue
            out = outputs.get(inv.index)
            if out is None:
                inv.missing[name] = f"{name} recorded nothing for invocation {inv.index}"
                continue
            record_output(inv, out)
            if name == p.collector and out.error is not None:
                # the pass's own tracer failed: its evidence of the pass is incomplete,
                # so the pass is kept as evidence but not judged
                p.error = p.error or f"{name} failed: {out.error}"
