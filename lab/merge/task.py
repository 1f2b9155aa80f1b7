"""The merged run of a fixture task's ``lab campaign --task … --shard I/N``: written as an
unsharded fixture-task campaign is (:func:`lab.workloads.evidence.write_task_results`: its
``campaign`` document with the task's evidence map, the calibration of its seeds, the
task's report), over every shard's repetitions.

    if is_task_campaign(result):
        archive = write_merged_task(result, run_dir, shards=shards, signer=signer,
                                    started_epoch=t0, say=print, dependencies=deps)

Nothing is judged again: each repetition keeps its shard's judgement; k of N, the clauses'
counts and the interval are the campaign record's own, over all repetitions. Every shard
checked the task before its agent ran (its failing baseline, its seeds): the calibration
counted is shard 1's, and :mod:`lab.merge.shards` refuses shards whose calibration keys
differ. Every repetition must start from the same baseline commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.merge.shards import MergeError, ShardArchive
from lab.model import RunResult

if TYPE_CHECKING:
    from lab.evidence.signing import Signer

#: ``options.mode`` of a fixture task's campaign (:mod:`lab.workloads.campaign`)
MODE = "campaign-task"


def is_task_campaign(result: RunResult) -> bool:
    return result.campaign is not None and result.options.get("mode") == MODE


def write_merged_task(
    result: RunResult,
    run_dir: Path,
    *,
    shards: list[ShardArchive],
    signer: Signer | None,
    started_epoch: float,
    say: Callable[[str], None],
    dependencies: list[dict[str, Any]],
) -> Any:
    """results.json, the reports and (with a signer) the archive of the merged campaign;
    its archive's info, or None."""
    from lab.workloads.campaign import campaign_document
    from lab.workloads.evidence import write_task_results

    assert result.campaign is not None
    commits = sorted({r.baseline_commit for r in result.campaign.repetitions})
    if len(commits) > 1:
        raise MergeError(
            f"the shards' repetitions start from different baseline commits "
            f"({', '.join(c[:12] for c in commits)}); re-run the shards with the same fixture."
        )
    # shard 1's own records, as the merge kept them (its unpacked copy is gone by now)
    own = run_dir / "shards" / str(shards[0].spec.index) / "results.json"
    first = json.loads(own.read_text("utf-8"))
    return write_task_results(
        result,
        run_dir,
        extra={
            "campaign": campaign_document(result.campaign),
            "calibration": first.get("calibration") or {"met": 0, "total": 0},
        },
        signer=signer,
        started_epoch=started_epoch,
        say=say,
        dependencies=dependencies,
    )
