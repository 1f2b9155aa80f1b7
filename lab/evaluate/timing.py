"""Untraced timing runs: clients alternated on the same fixture, reported as medians and a
ratio. Timing is measured with no tracer attached; traced runs are for diagnosis only.

    timing = alternate({"baseline": base, "candidate": cand}, rounds=12, max_rounds=36,
                       size=524_288, workdir=tmp, log=log, sandbox=sandbox)
    timing.ratio["first_backup_wall"]       # the median of the rounds' candidate ÷ baseline
    timing.ratio_interval["first_backup_wall"]  # its 95 % interval (lab.evaluate.interval)
    timing.rounds, timing.rounds_rule.stopped    # 16, "target": within ±5 % after 16 rounds

At least ``rounds`` rounds run; with ``max_rounds`` above it, more follow, ``STEP`` at a
time, until the interval of every deciding ratio (``DECIDING_METRICS``, and a campaign's
speed-goal metric) is within ±``TARGET_HALF_WIDTH`` of its ratio, or ``max_rounds`` have
run. Twelve rounds gave the seeded client against itself ±3.7 % at the median of its
repeats on the lab's idle machine but up to ±12 % in a noisy session (docs/performance.md):
a fixed count either wastes rounds on a quiet machine or leaves a wide bar on a busy one.
The rule looks only at the interval's width, never at where it lies, so it cannot steer
the ratio towards a goal; the record keeps the rule, the reason it stopped and each
deciding half-width (``lab.model.timing.RoundsRule``).

With ``sandbox`` (what ``lab evaluate`` does), every round runs in a sandbox cell of its
own, exactly as a judged pass does (the same environment, box, bounds and opaque cgroup
names: nothing tells a client it is being timed): a candidate is never run outside the
sandbox, timed or not. Wall time then includes the sandbox's set-up, the same for both
clients; CPU time is the invocation cgroup's (everything the client started).

Every round is checked as a judged pass is: both invocations exit 0 within the limit and,
after each, the backup on disk matches the fixture digest and the receiver's record
(``lab.workloads.backup.backup_check``). A round that fails its check is a *failed* round,
kept out of the spreads and counted with its reason; a client with a failed round has no
ratio (N/A): a missing or wrong backup is never a fast one, and a client that behaves
differently when timed never meets a speed goal.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.evaluate import interval
from lab.evaluate.timing_cell import Closing, round_problem, sandboxed_round
from lab.host import procs
from lab.judge.aggregate import spread
from lab.model.evaluation import ClientTiming, RoundsRule, Timing
from lab.model.timing import DECIDING_METRICS, INVOCATIONS, TARGET_HALF_WIDTH, invocation_of
from lab.sandbox import Sandbox
from lab.workloads.backup import fixture
from lab.workloads.backup.decoy import Decoy
from lab.workloads.backup.receiver import Receiver

#: rounds added at a time once the least have run and an interval is still too wide
STEP = 4

#: failed rounds' reasons kept per client (all of them are counted)
FAILURES_KEPT = 5


def _one_round(
    client: Path,
    source: Path,
    digest: str,
    workdir: Path,
    log: procs.CommandLog | None,
    timeout: float,
    invocations: tuple[str, ...] = INVOCATIONS,
) -> dict[str, Any]:
    """A first backup into an empty receiver, then an unchanged second invocation (or the
    first ``invocations`` of them)."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        state = Path(tmp)
        row: dict[str, Any] = {}
        with (
            Receiver.serving(state / "store", state / "rx.jsonl") as rx,
            Decoy.serving(state / "decoy.jsonl"),
        ):
            for label in invocations:
                done = procs.run(
                    [str(client), "--source", str(source), "--receiver", rx.address],
                    purpose=f"untraced timing: {client.name} {label}",
                    log=log,
                    stdout=state / f"{label}.stdout",
                    stderr=state / f"{label}.stderr",
                    timeout=timeout,
                    accept=None,
                )
                rx.wait_idle()
                row[f"{label}_wall"] = done.duration_s
                row[f"{label}_cpu"] = done.cpu_s
                row[f"{label}_exit"] = done.exit_status
                problem = round_problem(
                    label,
                    exit_status=done.exit_status,
                    timed_out=done.timed_out,
                    store=state / "store",
                    digest=digest,
                    source=source,
                    receiver_digest=rx.saved_digest,
                )
                row.setdefault("failed", problem)
    return row


METRICS = ("first_backup_wall", "first_backup_cpu", "unchanged_wall", "unchanged_cpu")


#: the speed-goal metric a client's own work decides: (candidate − floor) ÷ (baseline − floor)
#: of the first backup's wall medians, the instrument floor's share taken out of both
ABOVE_FLOOR = "first_backup_wall_above_floor"


def later_rounds(clients: Sequence[str], metrics: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """What a round after the least times: each client a deciding ratio needs (the baseline
    and the candidate; the floor for the share above it) -> the invocations it needs (the
    first backup; the unchanged one too for an ``unchanged_*`` ratio). The least rounds time
    every client's every invocation, so every ratio and spread has them; the rounds added
    only to narrow the deciding intervals time nothing else (half a round's cost with the
    defaults)."""
    needed = {"baseline", "candidate"} | ({"floor"} if ABOVE_FLOOR in metrics else set())
    upto = 2 if any(invocation_of(m) == "unchanged" for m in metrics) else 1
    return {name: INVOCATIONS[:upto] for name in clients if name in needed}


def _above_floor(
    rows: dict[str, list[dict[str, Any]]],
    seed: str,
    ratio: dict[str, float | None],
    bars: dict[str, list[float] | None],
    unchecked: bool = False,
) -> None:
    """``ratio[ABOVE_FLOOR]`` and its interval, over the rounds where all three clients
    timed a first backup that passed its check: undefined (None) when the baseline's
    median is not above the floor's (no client share to compare), or when the baseline or
    the candidate failed a round (``unchecked``)."""
    names = ("baseline", "candidate", "floor")
    columns: list[list[float | None]] = [
        [None if r.get("failed") else r.get("first_backup_wall") for r in rows[n]] for n in names
    ]
    complete = [i for i in range(len(columns[0])) if all(c[i] is not None for c in columns)]
    walls = [[c[i] or 0.0 for i in complete] for c in columns]  # none is None here
    if unchecked or not complete:
        ratio[ABOVE_FLOOR], bars[ABOVE_FLOOR] = None, None
        return
    base, cand, floor = (statistics.median(w) for w in walls)
    if base <= floor:
        ratio[ABOVE_FLOOR], bars[ABOVE_FLOOR] = None, None
        return
    ratio[ABOVE_FLOOR] = round((cand - floor) / (base - floor), 4)
    bar = interval.above_floor_interval(*walls, seed=f"{seed}:{ABOVE_FLOOR}")
    bars[ABOVE_FLOOR] = None if bar is None else list(bar)


def alternate(
    clients: dict[str, Path],
    *,
    rounds: int,
    size: int,
    workdir: Path,
    log: procs.CommandLog | None = None,
    timeout: float = 60.0,
    seed: str = "timing",
    sandbox: Sandbox | None = None,
    floor: dict[str, str | None] | None = None,
    max_rounds: int | None = None,
    target: float = TARGET_HALF_WIDTH,
    metrics: tuple[str, ...] = DECIDING_METRICS,
) -> Timing:
    """Run every client at least ``rounds`` times, in alternation (A B A B …), so that drift
    in the machine's load affects them alike. Returns per-client spreads and, when both a
    ``baseline`` and a ``candidate`` are present, per metric the median of the rounds'
    candidate ÷ baseline (``lab.evaluate.interval``) with its 95 % interval. A client named
    ``floor`` is the instrument floor's reference uploader; ``floor`` is its identity
    (``lab.evaluate.floor.Floor.describe``).

    With ``max_rounds`` above ``rounds``, more rounds follow in blocks of ``STEP`` until the
    interval of every ratio in ``metrics`` is within ± ``target`` of its ratio, or
    ``max_rounds`` have run (``lab.model.timing.RoundsRule``); the record says which."""
    cap = rounds if max_rounds is None else max(rounds, max_rounds)
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "timing-source.bin"
    digest = fixture.write_source(source, seed=seed, size=size)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in clients}
    data = source.read_bytes() if sandbox is not None else b""
    closing = Closing()
    wanted = rounds
    later = later_rounds(list(clients), metrics)
    try:
        while True:
            while len(rows[next(iter(clients))]) < wanted:
                least = len(rows[next(iter(clients))]) < rounds
                for name, path in clients.items():
                    timed = INVOCATIONS if least else later.get(name, ())
                    if not timed:
                        row: dict[str, Any] = {}  # not timed in this round
                    elif sandbox is not None:
                        row = sandboxed_round(
                            sandbox, name, path, data, digest, workdir, timeout, closing, timed
                        )
                    else:
                        row = _one_round(path, source, digest, workdir, log, timeout, timed)
                    rows[name].append(row)
            spreads = {name: client_timing(runs) for name, runs in rows.items()}
            ratio, bars = _ratios(rows, spreads, seed, only=metrics)
            stopped, widths = _stop(ratio, bars, spreads, metrics, target)
            if stopped is None and wanted >= cap:
                stopped = "cap"  # "fixed" below when no more rounds were allowed
            if stopped is not None:
                break
            wanted = min(cap, wanted + STEP)
    except BaseException:
        with contextlib.suppress(Exception):  # the error in flight is the one to raise
            closing.settle()
        raise
    else:
        closing.settle()  # the last cell closed before the record says the rounds are done
    finally:
        source.unlink(missing_ok=True)
    # every interval now (the deciding ones again: seeded, so the same as at the look)
    ratio, bars = _ratios(rows, spreads, seed)
    rule = RoundsRule(
        min_rounds=rounds,
        max_rounds=cap,
        target_half_width=target,
        metrics=metrics,
        stopped="fixed" if cap == rounds else stopped,
        half_widths=widths,
        # what the rounds after the least timed; nothing when none ran
        later_rounds=dict(later) if wanted > rounds else {},
    )
    return Timing(
        rounds=wanted,
        size=size,
        method=(
            "untraced; clients alternated; each round = first backup into an empty "
            "receiver + unchanged second invocation, checked as a judged pass is (exit 0 "
            "and a verified backup after each; a failed round is counted, never timed, and "
            "leaves the ratio N/A); the rounds after the least time only the clients and "
            "invocations the deciding ratios need (rounds_rule.later_rounds); "
            + (
                "each invocation in the sandbox: wall = sandbox spawn to the client's exit "
                "(the sandbox's set-up included, alike for both), cpu = the invocation "
                "cgroup's cpu.stat; the receiver's store is in memory (a tmpfs), so the "
                "disk's sync latency is timed for no client, and each round's cell runs "
                "true once, untimed, before the client (its first exec chain is slower); a "
                "round's cell is removed while the next one opens, and is gone before that "
                "one runs anything"
                if sandbox is not None
                else "wall = spawn to reap, cpu = user+sys rusage"
            )
        ),
        clients=spreads,
        ratio=ratio,
        ratio_interval=bars,
        interval_method=None if bars is None else interval.METHOD,
        floor=floor,
        rounds_rule=rule if ratio is not None else None,
    )


def _ratios(
    rows: dict[str, list[dict[str, Any]]],
    spreads: dict[str, ClientTiming],
    seed: str,
    only: tuple[str, ...] | None = None,
) -> tuple[dict[str, float | None] | None, dict[str, list[float] | None] | None]:
    """Per metric, the median of the rounds' candidate ÷ baseline and its interval (None,
    None without both clients); with ``only``, the intervals of those metrics alone (the
    rule's look between blocks: a bootstrap is ~17 ms a metric at 20 rounds)."""
    if "baseline" not in rows or "candidate" not in rows:
        return None, None
    ratio: dict[str, float | None] = {}
    bars: dict[str, list[float] | None] = {}
    unchecked = spreads["baseline"].failed_rounds or spreads["candidate"].failed_rounds
    for metric in METRICS:
        base = [r.get(metric) for r in rows["baseline"]]
        cand = [r.get(metric) for r in rows["candidate"]]
        value = None if unchecked else interval.median_round_ratio(base, cand)
        ratio[metric] = None if value is None else round(value, 4)  # None: N/A
        if value is None or (only is not None and metric not in only):
            bars[metric] = None
            continue
        bar = interval.ratio_interval(base, cand, seed=f"{seed}:{metric}")
        bars[metric] = None if bar is None else list(bar)
    if "floor" in rows and (only is None or ABOVE_FLOOR in only):
        _above_floor(rows, seed, ratio, bars, bool(unchecked))
    return ratio, bars


def _stop(
    ratio: dict[str, float | None] | None,
    bars: dict[str, list[float] | None] | None,
    spreads: dict[str, ClientTiming],
    metrics: tuple[str, ...],
    target: float,
) -> tuple[str | None, dict[str, float | None]]:
    """Why the rounds stop now (None: they go on), and each deciding half-width."""
    widths: dict[str, float | None] = {}
    for metric in metrics:
        value = (ratio or {}).get(metric)
        bar = (bars or {}).get(metric)
        widths[metric] = (
            None if value is None or bar is None or value <= 0 else
            round(interval.half_width(bar, value), 4)
        )  # fmt: skip
    if ratio is None:
        return "fixed", widths  # nothing to compare: one client, or no baseline
    if any(spreads[n].failed_rounds for n in ("baseline", "candidate")):
        return "failed-round", widths
    if any(w is None for w in widths.values()):
        return "undefined", widths
    if all(w is not None and w <= target for w in widths.values()):
        return "target", widths
    return None, widths


def client_timing(runs: list[dict[str, Any]]) -> ClientTiming:
    """One client's spreads over the rounds that passed their check, and the failed ones
    counted with their first reasons."""
    good = [r for r in runs if not r.get("failed")]
    failures = [str(r["failed"]) for r in runs if r.get("failed")]
    return ClientTiming(
        # a metric a round did not time (lab.evaluate.timing.later_rounds) is not counted
        spreads={metric: spread([r.get(metric) for r in good]) for metric in METRICS},
        nonzero_exits=sum(1 for r in runs for k in r if k.endswith("_exit") and r[k]),
        failed_rounds=len(failures),
        failures=tuple(failures[:FAILURES_KEPT]),
    )
