"""A perf pass's post-processing at the end of the pass, its invocations' at once.

perf's ``collect`` only reads the files ``perf record`` left (``perf report`` with DWARF
unwinding, ``--stats``, ``annotate``): about 0.3 s of CPU an invocation, which used to run
between one invocation and the next, one core idle. A perf pass now queues each
invocation's ``collect`` here and runs the queue once its last invocation has ended, up to
``workers`` at a time (each is a ``perf`` child process, so threads suffice): the number of
cores, not ``--jobs``, which says how many *passes* may overlap; a run whose passes carry a
packet capture has ``--jobs`` 1, and its perf passes are the ones that read the most.

Why it stays sound: ``collect`` reads only ``ctx.out_dir`` and the exit record of the
wrapped command, both final when the invocation ended; the queue is drained after the
pass's packet capture stopped and its endpoints closed, so no measured client or capture
shares the cores with it; it is drained *before* the pass's box is taken down, because
``perf report`` resolves the client's symbols from the file the samples' mappings name,
which is inside the box (drained after the box had gone, a report showed raw addresses
instead of ``hash_file``: measured); and each output lands exactly where the pass would
have put it (the invocation's observations, or the pass's error when perf failed), before
the pass is returned. A traced pass always runs alone, so the runner holds one queue.

    deferred = Deferred(workers=2)
    deferred.add(tracer, ctx, completed, p, inv)   # instead of tracer.collect(...)
    deferred.finish()                              # every output recorded
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lab.collectors import process_collector
from lab.collectors.base import CollectorOutput, InvocationContext, ProcessCollector
from lab.host.procs import Completed
from lab.model import Invocation, Pass
from lab.run.invocation import record_output


def deferrable(collector: str) -> bool:
    """Whether a pass under ``collector`` queues its tracer's ``collect`` here."""
    if collector == "none":
        return False
    try:
        return process_collector(collector).deferrable
    except KeyError:
        return False  # a session collector (bpftrace): it stops once, not per invocation


@dataclass
class Pending:
    tracer: ProcessCollector
    ctx: InvocationContext
    completed: Completed
    p: Pass
    inv: Invocation

    def collect(self) -> CollectorOutput:
        return self.tracer.collect(self.ctx, self.completed)


class Deferred:
    """Invocations whose tracer output is parsed after the phase."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self.pending: list[Pending] = []

    def add(
        self,
        tracer: ProcessCollector,
        ctx: InvocationContext,
        completed: Completed,
        p: Pass,
        inv: Invocation,
    ) -> None:
        self.pending.append(Pending(tracer, ctx, completed, p, inv))

    def finish(self) -> None:
        """Collect every queued output and record it; the queue is empty afterwards."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            outputs = list(pool.map(Pending.collect, pending))
        for item, out in zip(pending, outputs, strict=True):
            apply(item.p, item.inv, out)


def apply(p: Pass, inv: Invocation, out: CollectorOutput) -> None:
    """What ``Runner.run_invocation`` does with its tracer's output."""
    if out.error is not None:
        # a tracer that failed, crashed or hung taints its whole pass: kept, not judged
        p.error = p.error or f"{out.name} failed in invocation {inv.index}: {out.error}"
    record_output(inv, out)
