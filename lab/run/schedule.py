"""``--jobs N``: which passes of a run may run at the same time, and running them so.

Passes of different scenarios share no state: each has its own network namespace (named
with a per-run counter), scratch directory (box, store, home, tmp from ``mkdtemp``),
invocation cgroups named after the pass, receiver and decoy (their own listening sockets,
threads and records file), packet capture (inside its own namespace, which sees only its
own packets) and evidence directory. What they do share is the machine: its cores and the
lab's own process. A run goes phase by phase (every untraced pass, then every strace pass,
…: ``lab.run.phases``), and within a phase up to N passes of different scenario
repetitions run at a time, traced or not:

* what every observer *attributes* survives it: strace and perf follow their own process
  tree, bpftrace's probes are filtered to, and its maps keyed by, each invocation's cgroup,
  the capture runs inside the pass's own namespace, and the endpoints record only their
  own pass's connections;
* what calibration *checks* survives it: counts of calls, bytes, connections, packets and
  sampled symbols do not depend on who else had the core; the one figure of time it checks
  (busy-spin's wall and CPU floors) can only grow with contention. The capture's kernel drop
  counter is recorded for every pass, so a drop caused by contention would be seen, never
  hidden (none was seen: ``docs/performance.md``);
* what contention does perturb, the times the tracers report and the clients' wall and CPU
  times, is marked: every pass that really ran beside another says ``"concurrent": true``,
  and the reports and the console say which passes those were;
* timing rounds (``lab evaluate``'s timing, the instrument floor) never go through here:
  they are sequential by construction (``lab.evaluate.timing``);
* a candidate client is untrusted, and what overlapping passes share is guarded: each
  pass that may run at once has a client user of its own (``Sandbox.use_slots``), so the
  filter's refusals, which the kernel logs by uid, and RLIMIT_NPROC are each pass's own,
  and no client can signal another; the endpoints' connection and upload caps are divided
  among the passes at once (``lab.workloads.backup.endpoint``), so a flood in one cannot
  take the file descriptors another needs;
* with ``--sandbox off`` the passes would share the host's loopback and the lab's user:
  they run one at a time, and the record says why.

    decision = decide(2, sandboxed=True)
    decision.jobs, decision.overlaps("none"), decision.overlaps("strace")   # 2, True, True
    results = run_ordered(items, work, jobs=2, done=show, abort=stop_everything)

``run_ordered`` returns results in the order of ``items`` whatever order they finish in,
so ``results.json`` lists scenarios exactly as a sequential run does.

A phase's longest pass sets itself up alone (``lead_first``): the others wait until its
first client runs (``client_running``, called by the runner as each client starts) or its
pass ends. Setting a pass up (its namespace, endpoints and jail) is mostly the lab's own
Python, and three at once shared one interpreter lock: the longest pass, the one the phase
waits for, reached its first client about 80 ms after the phase began instead of about
30 ms alone (docs/performance.md, round 8). Only when the passes start changes; what each
pass does, and what overlaps what (``concurrent``), is as before.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lab.model.records import ConcurrencyRecord

T = TypeVar("T")
R = TypeVar("R")

#: the passes that may overlap one another within their phase (every collector's: see the
#: module docstring for why each observer's attribution survives it)
OVERLAPPING = ("none", "strace", "bpftrace", "perf")
#: the most passes a run may overlap (more than the cores only adds contention)
MAX_JOBS = 64
#: the longest a phase's other passes wait for its longest pass's first client: a bound
#: (that pass's set-up takes tens of milliseconds), never a pause a run is meant to take
LEAD_WAIT_S = 2.0
#: set in the longest pass's worker only: what ``client_running`` sets there
_LEAD: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "lab_lead_pass", default=None
)


class Cancelled(Exception):
    """Raised in a worker that was about to start a pass or an invocation after ``abort``."""


def cores() -> int:
    return max(1, os.cpu_count() or 1)


def default_jobs() -> int:
    """The default of ``--jobs``: one more pass than there are cores. A pass spends most of
    its wall time waiting (process starts, the disk's syncs, a tracer's start and stop), so
    with one pass per core a core idles; measured on a 2-core machine (docs/performance.md)
    3 passes at once beat 2 and equal 4."""
    return cores() + 1


@dataclass(frozen=True)
class Concurrency:
    """What ``--jobs`` asked for and what the run does with it."""

    requested: int
    #: passes run at once (1: strictly sequential, today's behaviour)
    jobs: int
    #: why the run is sequential although more was asked for; None otherwise
    why_sequential: str | None = None

    def overlaps(self, collector: str) -> bool:
        """Whether a pass under ``collector`` may run beside another one."""
        return self.jobs > 1 and collector in OVERLAPPING

    def sentence(self) -> str:
        if self.jobs > 1:
            return f"passes up to {self.jobs} at a time within each phase"
        if self.why_sequential:
            return f"passes one at a time ({self.why_sequential})"
        return "passes one at a time"

    def to_dict(self, concurrent_passes: int = 0) -> ConcurrencyRecord:
        return {
            "jobs_requested": self.requested,
            "jobs": self.jobs,
            "overlapping": list(OVERLAPPING) if self.jobs > 1 else [],
            "concurrent_passes": concurrent_passes,
            "why_sequential": self.why_sequential,
        }


def decide(requested: int, *, sandboxed: bool) -> Concurrency:
    """How many passes run at once for ``--jobs requested`` (see the module docstring)."""
    if requested <= 1:
        return Concurrency(requested, 1)
    why: str | None = None
    if not sandboxed:
        why = "--sandbox off: the passes would share the host's loopback, so they run one at a time"
    return Concurrency(requested, 1 if why else requested, why)


def run_ordered(
    items: Sequence[T],
    work: Callable[[T], R],
    *,
    jobs: int,
    done: Callable[[int, R], None],
    abort: Callable[[], None],
    first: Callable[[T], Any] | None = None,
) -> list[R]:
    """``work(item)`` for every item, up to ``jobs`` at a time on threads; the results in
    the order of ``items``. ``done(index, result)`` is called on *this* thread as each one
    finishes (so progress lines never interleave). On an error or an interrupt (Ctrl-C
    and SIGTERM arrive on this thread), ``abort()`` is called until every worker has
    returned (it must make them stop: cancel, kill their processes), then it is re-raised.
    ``first``: a sort key; the items with the smallest start first (ties in the order of
    ``items``), e.g. the longest first: a long pass started last would finish alone while
    the other cores idle."""
    results: dict[int, R] = {}
    pool = cf.ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="lab-pass")
    order = list(range(len(items)))
    if first is not None:
        keys = [first(item) for item in items]
        order.sort(key=lambda i: keys[i])
    # each worker runs in a copy of this thread's context: the processes it starts belong
    # to the caller's process scope (lab.host.live)
    futures = {pool.submit(contextvars.copy_context().run, work, items[i]): i for i in order}
    try:
        for future in cf.as_completed(futures):
            index = futures[future]
            results[index] = future.result()
            done(index, results[index])
    except BaseException:
        _drain(futures, abort)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [results[i] for i in range(len(items))]


def lead_first(work: Callable[[T], R], lead: T) -> Callable[[T], R]:
    """``work``, except that every item but ``lead`` first waits (at most ``LEAD_WAIT_S``)
    until ``lead``'s work calls ``client_running`` or returns. For ``run_ordered`` with
    ``first``: ``lead`` is the item it starts first."""
    running = threading.Event()

    def wrapped(item: T) -> R:
        if item != lead:
            running.wait(LEAD_WAIT_S)
            return work(item)
        token = _LEAD.set(running)
        try:
            return work(item)
        finally:
            running.set()
            _LEAD.reset(token)

    return wrapped


def client_running() -> None:
    """A client runs: if this is a phase's longest pass, its other passes go on."""
    event = _LEAD.get()
    if event is not None:
        event.set()


def _drain(futures: dict[cf.Future[Any], int], abort: Callable[[], None]) -> None:
    """Stop every worker and wait for all of them: a pass left running would outlive the
    run's clean-up (its cell, cgroups and namespace are closed by the worker itself)."""
    for future in futures:
        future.cancel()
    pending = {f for f in futures if not f.done()}
    while pending:
        # A second Ctrl-C must not leave workers behind: keep stopping them. ``abort`` is
        # called on every round, so a process started after the previous round is stopped too.
        with contextlib.suppress(KeyboardInterrupt):
            abort()
            _, pending = cf.wait(pending, timeout=0.2)


class Spans:
    """When every pass of a run began and ended, so that each pass can say, as it ends,
    whether it ran beside another: recorded only when it really overlapped one, not merely
    could have. Every pass that overlaps one began before it ended, so its span is known."""

    def __init__(self) -> None:
        self._spans: dict[int, tuple[float, float | None]] = {}
        self._lock = threading.Lock()

    def begin(self) -> int:
        with self._lock:
            key = len(self._spans)
            self._spans[key] = (time.monotonic(), None)
            return key

    def end(self, key: int) -> bool:
        """Close the span; whether another pass ran during it."""
        with self._lock:
            t0, _ = self._spans[key]
            t1 = time.monotonic()
            self._spans[key] = (t0, t1)
            return any(
                other != key and a < t1 and (b is None or b > t0)
                for other, (a, b) in self._spans.items()
            )
