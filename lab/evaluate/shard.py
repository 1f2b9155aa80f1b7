"""``lab evaluate --shard I/N``: one machine's share of a candidate evaluation.

The work units are the contract conditions × repetitions (``scenarios/candidate/``), split
exactly as ``lab run`` splits scenarios (:mod:`lab.run.shard`: sorted, every N-th). Every
shard shares two ids: the *evaluation id* (the frozen judgement, :func:`lab.evaluate.judge.
freeze`, the same on every machine for the same lab and options) and the *run id* that names
the merged run (``--run-id``, or a digest of the evaluation id, the candidate as given, the
collectors and the shard count), so ``lab merge`` can tell one evaluation's shards from
another's, even another candidate's under the same frozen contract.

    plan = plan_shard(request, conditions, frozen)     # request.shard == ShardSpec(2, 3)
    plan.run_id        # "eval-1f0c…-shard2of3": this shard's run directory
    plan.units         # [("changed-source", 2), ("interrupted", 1), …] in run order
    plan.untimed       # "timed in shard 1 of 3 …": only shard 1 runs the timing rounds

Where the instrument check and the timing rounds happen:

* The **instrument check** (the seeded ``false-success`` and ``unexpected-egress``) runs in
  *every* shard: it shows that the collectors *of that machine* catch the seeded defects,
  and each shard's verdicts come from its own machine, so each must earn them. Shard 1's
  check is the merged run's (where an unsharded run keeps it); every shard's is kept under
  ``shards/<I>/`` and a refusal on any machine refuses the merged evaluation.
* The (untraced) **timing rounds** run in shard 1 only, after its judged units, in the same process:
  one machine's alternated baseline/candidate/floor rounds give one ratio, whereas ratios
  measured on N different CPUs cannot be pooled, and N machines would spend N times the
  rounds for no better figure. Nothing else of the lab runs beside them on that machine
  (one shard per machine), so timing never overlaps other work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.evaluate.candidate import input_digest
from lab.evaluate.request import EvaluationRequest
from lab.model.evaluation import FrozenEvaluation
from lab.run import shard
from lab.workloads.backup.scenario import Scenario

#: the one shard that runs the untimed rounds
TIMING_SHARD = 1
#: a merged evaluation's work unit (``shard.unit`` in results.json)
UNIT_KIND = "condition"


@dataclass(frozen=True)
class EvaluationShard:
    spec: shard.ShardSpec
    #: the run id every shard of this evaluation shares (the merged run's)
    frozen_id: str
    #: this shard's (condition, repetition) units, in the order an unsharded run takes them
    units: list[tuple[str, int]]
    #: ``results.json`` → ``shard``
    record: dict[str, Any]

    @property
    def run_id(self) -> str:
        """This shard's own run directory and archive name."""
        return shard.shard_run_id(self.frozen_id, self.spec)

    @property
    def untimed(self) -> str | None:
        """Why this shard runs no timing rounds (None: it runs them)."""
        if self.spec.index == TIMING_SHARD:
            return None
        return (
            f"timed in shard {TIMING_SHARD} of {self.spec.count} only: one machine's "
            "alternated rounds give the ratio (this shard judged its units only)"
        )


def shared_run_id(
    request: EvaluationRequest, frozen: FrozenEvaluation, spec: shard.ShardSpec
) -> str:
    """``--run-id``, or what every shard derives alike: the frozen evaluation, the candidate
    as given (by digest, never by path) and the options that decide what a shard computes."""
    if request.run_id:
        return shard.check_run_id(request.run_id)
    return shard.frozen_run_id(
        {
            "evaluation_id": frozen.evaluation_id,
            "candidate": {"kind": request.kind, "sha256": input_digest(request.kind, request.path)},
            "collector": request.collector,
            "packets": request.packets,
            "shards": spec.count,
        },
        prefix="eval",
    )


def plan_shard(
    request: EvaluationRequest, conditions: list[Scenario], frozen: FrozenEvaluation
) -> EvaluationShard:
    """This shard's units of ``conditions`` × ``frozen.repetitions`` and its record."""
    spec = request.shard
    assert spec is not None
    frozen_id = shared_run_id(request, frozen, spec)
    mine = spec.select(shard.work_units([s.name for s in conditions], request.repetitions))
    order = {s.name: i for i, s in enumerate(conditions)}
    units = sorted(((u.name, u.repetition) for u in mine), key=lambda u: (order[u[0]], u[1]))
    return EvaluationShard(
        spec=spec,
        frozen_id=frozen_id,
        units=units,
        record=shard.shard_record(spec, mine, frozen_id, UNIT_KIND),
    )
