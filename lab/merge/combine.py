"""``lab merge``: the verified shards of one run written as one run, of the same shape as an
unsharded run, signed and archived.

    outcome = merge(MergeRequest(archives=[...], pubkey=Path("lab.pub"), out=Path("merged")),
                    say=print)
    outcome.result.calibrated, outcome.archive.path

Nothing is judged again: every repetition keeps the verdicts its shard gave it, and the
aggregates k/N are the judges' own (``lab.judge.aggregate``) over all repetitions. The run
directory holds every unit's evidence where an unsharded run keeps it
(``<scenario>/r<rep>/``), the scenario and probe files once, a ``commands.jsonl`` whose rows
say which shard they come from, a ``timeline.jsonl`` whose rows are on one time base
(CLOCK_REALTIME, each shard's rows converted with its own measured offset; how far apart the
machines' clocks were is not measured, :mod:`lab.merge.timeline`), and under ``shards/<I>/`` each
shard's own records verbatim (its results.json, timeline, commands, signed SHA256SUMS and
provenance). The provenance lists every shard archive, with its digest, as a resolved
dependency; ``results.json`` → ``shards`` and the reports' "Shards" section describe them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from lab.evaluate.verdicts import CALIBRATION_SCENARIOS
from lab.evidence.archive import PUBKEY
from lab.judge import aggregate
from lab.merge.evaluation import merged_evaluation, notes
from lab.merge.shards import MergeError, ShardArchive, check_shards, open_shards
from lab.merge.task import is_task_campaign, write_merged_task
from lab.merge.timeline import read_rows, write_merged_timeline
from lab.model import RunResult
from lab.pipeline import finish
from lab.run.shard import RUN_ID

#: shard files every merged run keeps once at its top (identical in every shard)
SHARED = ("scenarios", "probes")
#: files each shard's rows are concatenated into, tagged with the shard index (the
#: timeline is put on one time base instead: :mod:`lab.merge.timeline`)
CONCATENATED = ("commands.jsonl",)
TIMELINE = "timeline.jsonl"
#: an evaluation's records that are no unit's: shard 1's go where an unsharded evaluation
#: keeps them (every shard's stay under shards/<I>/): the frozen record and the candidate
#: (alike in every shard), and the instrument check's scenarios (shard 1's machine's); a
#: fixture task's campaign: its task file, and its baseline and seeds as shard 1 judged them
FROM_FIRST = (
    "evaluation.json",
    "candidate",
    *CALIBRATION_SCENARIOS,
    "campaign",
    "baseline",
    "task",
    "calibration",
)
#: a campaign's units: every shard's agent runs (``repetitions/r<N>/``) go where an unsharded
#: campaign keeps them
CAMPAIGN_UNITS = "repetitions"


@dataclass(frozen=True, kw_only=True)
class MergeRequest:
    archives: list[Path]
    #: the public key every shard must be signed with
    pubkey: Path
    #: the merged run goes to ``out/<run-id>/`` and ``out/<run-id>.tar.gz``
    out: Path = Path("artifacts")
    archive: bool = True


@dataclass
class MergeOutcome:
    result: RunResult
    run_dir: Path
    archive: Any | None  # lab.evidence.archive.ArchiveInfo
    shards: list[dict[str, Any]] = field(default_factory=list)


def merge(request: MergeRequest, *, say: Callable[[str], None]) -> MergeOutcome:
    if not request.pubkey.is_file():
        raise MergeError(
            f"--pubkey {request.pubkey}: no such key file; give the public key (lab.pub) "
            "the shards were signed with."
        )
    with tempfile.TemporaryDirectory(prefix="lab-merge-") as tmp:
        say(f"Verifying {len(request.archives)} shard archive(s) against {request.pubkey.name}…")
        shards = check_shards(open_shards(request.archives, pubkey=request.pubkey, work=Path(tmp)))
        frozen = shards[0].frozen_id
        if RUN_ID.fullmatch(frozen) is None:
            raise MergeError(f"{shards[0].name}: its run id {frozen!r} is not a run id.")
        run_dir = (request.out / frozen).resolve()
        try:
            request.out.mkdir(parents=True, exist_ok=True)
            run_dir.mkdir(mode=0o700)
        except FileExistsError:
            raise MergeError(
                f"{run_dir} already exists; remove it or merge into another --out."
            ) from None
        except OSError as exc:
            raise MergeError(f"{run_dir}: cannot be created ({exc.strerror or exc}).") from None
        say(f"Merging shards 1–{len(shards)} of run {frozen} into {run_dir}")
        try:
            records = [_copy_shard(s, run_dir, first=s is shards[0]) for s in shards]
        except BaseException:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
    result = merged_result(shards, records)
    # every shard's own timeline is under shards/<I>/; the merged one converts them
    result.environment["time_base"] = write_merged_timeline(
        [(s.spec.index, run_dir / "shards" / str(s.spec.index) / TIMELINE) for s in shards],
        run_dir / TIMELINE,
    )
    signer = None
    if request.archive:
        from lab.evidence.signing import Signer

        signer = Signer.from_env()
        result.signing = signer.describe()
        if signer.is_ephemeral:
            say(
                "No signing key configured (LAB_SIGNING_KEY): the merged run is signed with "
                "an ephemeral key, so its archive proves integrity but not authenticity."
            )
    dependencies = [
        {
            # the archive's file name, no "file:" URI (a bare name is no URI)
            "name": r["archive"],
            "digest": {"sha256": r["sha256"]},
            "annotations": {
                "shard": f"{r['index']}/{r['count']}",
                "runId": r["run_id"],
                "keyId": r["key_id"],
            },
        }
        for r in records
    ]
    # a fixture task's campaign is written as its unsharded campaign is
    writer: Callable[..., Any] = (
        partial(write_merged_task, shards=shards) if is_task_campaign(result) else finish
    )
    archive = writer(
        result,
        run_dir,
        signer=signer,
        started_epoch=_epoch(result.started_at),
        say=say,
        dependencies=dependencies,
    )
    return MergeOutcome(result=result, run_dir=run_dir, archive=archive, shards=records)


def _copy_shard(s: ShardArchive, run_dir: Path, *, first: bool) -> dict[str, Any]:
    """Move one shard's files into the merged run; return its ``shards`` record."""
    units = {u.name for u in s.units}
    own = run_dir / "shards" / str(s.spec.index)
    own.mkdir(parents=True)
    for entry in sorted(s.root.iterdir()):
        if entry.name in units and entry.is_dir():
            for unit in s.units:
                src = entry / f"r{unit.repetition}"
                if unit.name == entry.name and src.is_dir():
                    shutil.copytree(src, run_dir / unit.name / src.name, dirs_exist_ok=False)
        elif entry.name in SHARED:
            if first:
                shutil.copytree(entry, run_dir / entry.name)
        elif entry.name == PUBKEY:
            continue  # the trusted key; the merged run carries its own signer's
        elif entry.name == CAMPAIGN_UNITS and s.run.campaign is not None and entry.is_dir():
            for rep in s.run.campaign.repetitions:
                src = entry / f"r{rep.index}"
                if src.is_dir():
                    shutil.copytree(src, run_dir / CAMPAIGN_UNITS / src.name)
        elif entry.is_dir():
            shutil.copytree(entry, own / entry.name)
            if first and entry.name in FROM_FIRST:
                shutil.copytree(entry, run_dir / entry.name)
        else:
            if first and entry.name in FROM_FIRST:
                shutil.copyfile(entry, run_dir / entry.name)
            shutil.copyfile(entry, own / entry.name)
            if entry.name in CONCATENATED:
                _append_tagged(entry, run_dir / entry.name, s.spec.index)
    env = s.run.environment
    return {
        "index": s.spec.index,
        "count": s.spec.count,
        "run_id": s.run.run_id,
        "units": [
            u.to_dict(str(s.run.shard.get("unit") if s.run.shard else None))
            for u in sorted(s.units)
        ],
        "archive": s.name,
        "sha256": s.sha256,
        "key_id": s.key_id,
        "started_at": s.run.started_at,
        "finished_at": s.run.finished_at,
        "kernel": env.get("kernel"),
        "cpu_model": env.get("cpu_model"),
        "in_container": env.get("in_container"),
        "calibrated": s.run.calibrated,
        "files": sorted(f"shards/{s.spec.index}/{p.name}" for p in own.iterdir()),
        **notes(s),
    }


def _append_tagged(src: Path, dest: Path, index: int) -> None:
    with open(dest, "a", encoding="utf-8") as out:
        for row in read_rows(src):
            out.write(json.dumps({"shard": index, **row}, sort_keys=True) + "\n")


def merged_result(shards: list[ShardArchive], records: list[dict[str, Any]]) -> RunResult:
    """One RunResult over every shard's repetitions, in unsharded order, aggregated by the
    judges' own code (an evaluation's concluded by the evaluation's)."""
    first = shards[0].run
    result = RunResult(
        run_id=shards[0].frozen_id,
        started_at=min(s.run.started_at for s in shards),
        finished_at=max(s.run.finished_at for s in shards),
        options=dict(first.options),
        observers=dict(first.observers),
        environment={**first.environment, "merged_from_shards": len(shards)},
        scenarios=[],
        shards=records,
    )
    if first.campaign is not None:
        # its agent runs from every shard; its instrument check and baseline (judged
        # scenarios and record) shard 1's, where an unsharded campaign keeps its own
        runs = [r for s in shards if s.run.campaign for r in s.run.campaign.repetitions]
        result.campaign = replace(first.campaign, repetitions=sorted(runs, key=lambda r: r.index))
        result.scenarios = list(first.scenarios)
        result.aggregate = aggregate.aggregate(result.scenarios)
        return result
    names = list(first.options.get("scenarios") or [])
    # an evaluation's instrument check ran in every shard: shard 1's comes first, as in an
    # unsharded evaluation; a run's scenarios are all units
    checks = [sc for sc in first.scenarios if sc.name not in names]
    judged = [sc for s in shards for sc in s.run.scenarios if sc.name in names]
    order = {name: i for i, name in enumerate([*(sc.name for sc in checks), *names])}
    result.scenarios = sorted(
        checks + judged,
        key=lambda sc: (order.get(sc.name, len(order)), sc.name, sc.repetition),
    )
    result.aggregate = aggregate.aggregate(result.scenarios)
    if first.evaluation is not None:
        units = [sc for sc in result.scenarios if sc.name in names]
        result.evaluation = merged_evaluation(shards, units)
    return result


def _epoch(stamp: str) -> float:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
