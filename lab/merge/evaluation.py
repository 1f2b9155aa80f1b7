"""The evaluation of a merged ``lab evaluate --shard I/N``: one judgement over every shard's
condition × repetition units, concluded by the evaluation's own code
(:func:`lab.evaluate.verdicts.conclude`), never by re-judging a verdict.

    evaluation = merged_evaluation(shards, judged)   # judged: every shard's units, in order
    evaluation.status, evaluation.clauses["C1"].passed, evaluation.timing
    notes(shard)       # {"evaluation_status": "fail", "instrument_check_ok": True, "timed": True}

Where the pieces come from (see :mod:`lab.evaluate.shard` for why): the frozen record and
the candidate are every shard's alike (``lab.merge.shards`` refuses otherwise); the
instrument check is shard 1's when every machine's passed, else the first that failed, and
the evaluation is then refused as an unsharded one would be; the timing is shard 1's (the
only shard that runs timing rounds), dropped as an unsharded evaluation drops it when the
candidate hung in any shard.
"""

from __future__ import annotations

from typing import Any

from lab.evaluate.shard import TIMING_SHARD
from lab.evaluate.verdicts import conclude, hung_invocations, hung_reason
from lab.merge.shards import MergeError, ShardArchive
from lab.model import ScenarioResult
from lab.model.evaluation import Evaluation

#: statuses of a shard that judged nothing, and the merged evaluation then judges nothing
UNBUILT = ("build-failed", "patch-failed")


def _evaluation(s: ShardArchive) -> Evaluation:
    if s.run.evaluation is None:  # pragma: no cover - lab.merge.shards checks the kind
        raise MergeError(f"{s.name} holds no evaluation; it was not merged.")
    return s.run.evaluation


def merged_evaluation(shards: list[ShardArchive], judged: list[ScenarioResult]) -> Evaluation:
    """``shards`` in index order, checked; ``judged`` every shard's units in run order."""
    first = _evaluation(shards[0])
    unbuilt = [s for s in shards if _evaluation(s).status in UNBUILT]
    if unbuilt:
        if len(unbuilt) != len(shards):
            built = next(s for s in shards if s not in unbuilt)
            raise MergeError(
                f"{unbuilt[0].name} could not build the candidate but {built.name} could; "
                "build it in the same lab image on every machine and re-run the shards."
            )
        return first  # every machine failed alike: shard 1's record is the evaluation's
    for s in shards:
        check = _evaluation(s).instrument_check
        if check is not None and not check.ok:
            return Evaluation(
                frozen=first.frozen,
                candidate=first.candidate,
                status="refused",
                status_reason=(
                    f"the instrument did not catch the seeded defects on the machine of shard "
                    f"{s.spec} ({s.name}) with these collectors, so it refuses to judge the "
                    "candidate"
                ),
                instrument_check=check,
            )
    timer = _evaluation(shards[TIMING_SHARD - 1])
    hung = hung_invocations(judged)
    timing, skipped = timer.timing, timer.timing_skipped
    if hung:
        timing, skipped = None, hung_reason(hung, first.frozen.limits.invocation_timeout_s)
    bare = Evaluation(
        frozen=first.frozen,
        candidate=first.candidate,
        status="fail",
        instrument_check=first.instrument_check,
    )
    return conclude(
        bare, judged, size=first.frozen.fixture.size, timing=timing, timing_skipped=skipped
    )


def notes(s: ShardArchive) -> dict[str, Any]:
    """What a merged evaluation's (or campaign's) ``shards`` record adds about one shard."""
    campaign = s.run.campaign
    if campaign is not None:
        return {
            "instrument_check_ok": campaign.instrument_check.get("ok"),
            "baseline_status": campaign.baseline.get("status"),
        }
    evaluation = s.run.evaluation
    if evaluation is None:
        return {}
    check = evaluation.instrument_check
    return {
        "evaluation_status": evaluation.status,
        "instrument_check_ok": None if check is None else check.ok,
        "timed": evaluation.timing is not None,
    }
