"""Shard archives as ``lab merge`` takes them: each verified *before* a byte of it is read,
then checked against the others.

    shards = open_shards([Path("a.tar.gz"), Path("b.tar.gz")], pubkey=Path("lab.pub"),
                         work=private_tmp_dir)
    check_shards(shards)      # one run, one lab, every shard once, every unit once
    shards[0].run.scenarios, shards[0].root / "timeline.jsonl"

Each archive is first copied into ``work`` (a directory only this user can read), and the
*copy* is verified (``lab.evidence.verify``: structure, checksums, the signature against the
trusted key, the provenance) and then unpacked: what is read is exactly what was verified,
however the original file changes meanwhile. Every refusal is a :class:`MergeError`: one
sentence naming the archive and what to do.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.campaign.shard import UNIT_NAME as CAMPAIGN_UNIT
from lab.errors import ArchiveError, LabError, SchemaError
from lab.evidence.verify import VerificationError, verify_archive
from lab.host.digest import sha256_file
from lab.host.identity import image_digests
from lab.model import RunResult
from lab.run.shard import ShardSpec, Unit, work_units
from lab.schemas import validate_results


class MergeError(ArchiveError):
    """A shard archive that cannot be merged (exit status 1, like a failed verification)."""


@dataclass
class ShardArchive:
    """One verified, unpacked shard."""

    #: the archive as the user named it
    path: Path
    #: SHA-256 of the archive that was verified
    sha256: str
    key_id: str
    #: the unpacked run directory
    root: Path
    run: RunResult
    spec: ShardSpec
    frozen_id: str
    units: list[Unit]
    #: SHA256SUMS of the shard: run-relative path -> digest
    digests: dict[str, str]

    @property
    def name(self) -> str:
        return self.path.name


def open_shards(paths: list[Path], *, pubkey: Path, work: Path) -> list[ShardArchive]:
    if not paths:
        raise MergeError("lab merge needs the shard archives (SHARD.tar.gz ...) to merge.")
    names = [p.name for p in paths]
    for name in names:
        if names.count(name) > 1:
            raise MergeError(f"{name} is given twice; name every shard archive once.")
    return [open_shard(path, pubkey=pubkey, work=work / f"s{i}") for i, path in enumerate(paths)]


def open_shard(path: Path, *, pubkey: Path, work: Path) -> ShardArchive:
    work.mkdir(mode=0o700, parents=True)
    copy = work / path.name
    try:
        shutil.copyfile(path, copy)
    except OSError as exc:
        raise MergeError(
            f"{path}: cannot be read ({exc.strerror or exc}); check the path."
        ) from None
    try:
        report = verify_archive(copy, pubkey=pubkey)
    except VerificationError as failure:
        first = failure.report.first_failure
        what = first.message if first is not None and first.message else str(failure)
        what = what.removeprefix(f"{path.name}: ").rstrip(".")
        raise MergeError(
            f"{path.name} does not verify against {pubkey.name} ({what}); it was not merged: "
            "fetch that shard's archive again or re-run the shard."
        ) from None
    if not report.authenticity_established:
        raise MergeError(
            f"{path.name} was signed with an ephemeral key, so nothing shows who made it; run "
            "every shard with LAB_SIGNING_KEY set to the key whose public half you trust."
        )
    root = work / "unpacked"
    root.mkdir()
    with tarfile.open(copy, "r:gz") as tar:
        tar.extractall(root, filter="data")
    tops = [p for p in root.iterdir()]
    if len(tops) != 1 or not tops[0].is_dir():  # pragma: no cover - verification checks this
        raise MergeError(f"{path.name} does not hold one run directory; it was not merged.")
    run_dir = tops[0]
    digests = _checksums(run_dir)
    run = _results(path, run_dir)
    if run.shard is None:
        raise MergeError(
            f"{path.name} is not a shard (its results.json has no 'shard' record); merge "
            "only the archives of 'python -m lab run --shard I/N' (or 'evaluate --shard I/N')."
        )
    try:
        spec = ShardSpec(int(run.shard["index"]), int(run.shard["count"]))
        units = [Unit.from_dict(u, str(run.shard["unit"])) for u in run.shard["units"]]
        frozen = str(run.shard["run_id"])
    except (KeyError, TypeError, ValueError, LabError):
        raise MergeError(
            f"{path.name}: its shard record is malformed; it was not merged."
        ) from None
    return ShardArchive(
        path=path,
        sha256=sha256_file(copy),
        key_id=str(report.key_id or ""),
        root=run_dir,
        run=run,
        spec=spec,
        frozen_id=frozen,
        units=units,
        digests=digests,
    )


def _checksums(run_dir: Path) -> dict[str, str]:
    from lab.evidence.archive import CHECKSUMS, parse_checksums

    return parse_checksums((run_dir / CHECKSUMS).read_text("utf-8"))


def _results(path: Path, run_dir: Path) -> RunResult:
    try:
        document: Any = json.loads((run_dir / "results.json").read_text("utf-8"))
        validate_results(document)
        return RunResult.from_dict(document)
    except (OSError, ValueError, KeyError, TypeError, SchemaError):
        raise MergeError(
            f"{path.name}: its results.json cannot be read as a lab run; it was not merged."
        ) from None


def _same(shards: list[ShardArchive], what: str, value: Any, advice: str) -> None:
    first = shards[0]
    for other in shards[1:]:
        if value(other) != value(first):
            raise MergeError(
                f"{other.name} and {first.name} differ in {what} "
                f"({value(other)!r} and {value(first)!r}); {advice}"
            )


def check_shards(shards: list[ShardArchive]) -> list[ShardArchive]:
    """The shards of one run, each once, in index order; their units exactly the run's."""
    one_run = "merge the shards of one run only (the same inputs, or the same --run-id)."
    _same(shards, "run id", lambda s: s.frozen_id, one_run)
    _same(
        shards,
        "kind",
        _kind,
        "merge the shards of one 'lab run', 'lab evaluate' or 'lab campaign', never a mix.",
    )
    # one --run-id given to two campaigns or evaluations: the task, its calibration, the
    # frozen judgement or the candidate tells
    _same(
        shards,
        "task",
        lambda s: s.run.options.get("task_sha256"),
        "merge the shards of one task's campaign only (the same task file on every machine).",
    )
    _same(
        shards,
        "calibration key",
        lambda s: s.run.campaign.instrument_check.get("key") if s.run.campaign else None,
        "merge the shards of one calibrated task only (the same task, seeds, toolchain and "
        "limits on every machine).",
    )
    _same(
        shards,
        "evaluation id",
        _evaluation_id,
        "merge the shards of one evaluation only (the same lab, contract, size, repetitions "
        "and limits on every machine).",
    )
    _same(
        shards,
        "candidate",
        lambda s: _candidate(s.run),
        "merge the shards of one candidate only (the same patch, source tree or binary).",
    )
    _same(
        shards,
        "agent files",
        lambda s: s.run.campaign.agent_files if s.run.campaign else None,
        "give every shard of a campaign the same agent command and files.",
    )
    _same(shards, "shard count", lambda s: s.spec.count, one_run)
    _same(
        shards,
        "lab version",
        lambda s: s.run.options.get("lab_version"),
        "run every shard with the same lab (the same image).",
    )
    _same(
        shards,
        "image digest",
        # the content digest (the layers), else (a record without one) the local image ID
        lambda s: next(
            (d for d in image_digests(s.run.environment.get("image")) if d is not None), None
        ),
        "run every shard in the same lab image.",
    )
    _same(
        shards,
        "client digest",
        lambda s: s.run.environment.get("client_sha256"),
        "build the candidate in the same lab image on every machine (its build must be "
        "reproducible)."
        if shards[0].run.evaluation is not None
        else "run every shard with the same client binary.",
    )
    _same(
        shards,
        "options",
        lambda s: s.run.options,
        "run every shard with the same options (a missing tracer on one machine changes the "
        "passes: check 'python -m lab doctor' there).",
    )
    _same(
        shards,
        "scenario and probe files",
        lambda s: {k: v for k, v in s.digests.items() if k.startswith(("scenarios/", "probes/"))},
        one_run,
    )
    by_index: dict[int, ShardArchive] = {}
    for s in shards:
        if s.spec.index in by_index:
            raise MergeError(
                f"{s.name} and {by_index[s.spec.index].name} are both shard {s.spec}; give each "
                "shard's archive once."
            )
        by_index[s.spec.index] = s
    count = shards[0].spec.count
    missing = [str(i) for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise MergeError(
            f"shard(s) {', '.join(missing)} of {count} of run {shards[0].frozen_id} are "
            "missing; give every shard's archive (or re-run the missing shards)."
        )
    names, repetitions, _ = _work(shards[0].run)
    every = work_units(names, repetitions)
    for s in shards:
        expected = s.spec.select(every)
        ran = _work(s.run)[2]
        if not ran and _unjudged(s.run):
            ran = expected  # refused by its instrument check, or nothing could be built
        if sorted(s.units) != expected or ran != expected:
            raise MergeError(
                f"{s.name} holds units {_units(ran)} but shard {s.spec} of this run is "
                f"{_units(expected)}; it was not made by '--shard {s.spec}' of this run: "
                "re-run that shard."
            )
    return [by_index[i] for i in sorted(by_index)]


def _kind(s: ShardArchive) -> str:
    if s.run.campaign is not None:
        return "a campaign"
    return "an evaluation" if s.run.evaluation is not None else "a run"


def _evaluation_id(s: ShardArchive) -> str | None:
    if s.run.campaign is not None:
        return s.run.campaign.evaluation_id
    return None if s.run.evaluation is None else s.run.evaluation.evaluation_id


def _work(run: RunResult) -> tuple[list[str], int, list[Unit]]:
    """The names and repetitions a run's work units are made of, and the units it holds: a
    campaign's are its agent runs; an evaluation's instrument check is no unit of it."""
    if run.campaign is not None:
        ran = sorted(Unit(CAMPAIGN_UNIT, r.index) for r in run.campaign.repetitions)
        return [CAMPAIGN_UNIT], int(run.options.get("agent_repetitions", 1)), ran
    names = list(run.options.get("scenarios") or [])
    ran = sorted(Unit(r.name, r.repetition) for r in run.scenarios if r.name in names)
    return names, int(run.options.get("repetitions", 1)), ran


def _candidate(run: RunResult) -> tuple[str, str] | None:
    if run.evaluation is None:
        return None
    return (run.evaluation.candidate.kind, run.evaluation.candidate.input_sha256)


def _unjudged(run: RunResult) -> bool:
    """An evaluation shard that judged nothing, and said why in its status."""
    return run.evaluation is not None and run.evaluation.status in (
        "refused",
        "build-failed",
        "patch-failed",
    )


def _units(units: list[Unit]) -> str:
    shown = ", ".join(f"{u.name} r{u.repetition}" for u in units[:4])
    return f"[{shown}{', …' if len(units) > 4 else ''}]"
