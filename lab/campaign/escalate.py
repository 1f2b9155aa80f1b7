"""``--escalate-cmd CMD2``: a repetition the agent did not meet (failed, timed out, plateaued,
or its result did not build) is handed to a second agent in a fresh workspace with an
evidence package the lab writes and signs; the second agent's result passes the same gates
(``lab.campaign.conduct``) and is recorded as the repetition's ``escalation``.

    if needs_escalation(rep):
        package = write_package(rep_dir / "escalation-package", rep=rep, rep_dir=rep_dir,
                                task=task, signer=signer)
        # the second agent finds it read-only at $LAB_ESCALATION

The package (``README.md`` says the same to the second agent):
``TASK.md`` and ``constraints.json`` (the task, its clauses and their requirements, budget,
what is built and judged, the commands that decide success), ``patches/`` (each attempted
patch: every judged snapshot's and the final one), ``verification.json`` (per snapshot:
built or not, each clause passed or failed; the final judgement, for a fixture task each
verification command's result and each clause's verdict with its reason),
``verification/`` (a fixture task's: each judged command's stdout and stderr, their last
:data:`OUTPUT_TAIL` bytes), ``stop.json`` (the outcome and why the run stopped),
``SHA256SUMS`` of all of those and ``SHA256SUMS.sig`` (signify, the run's key; ``lab.pub``
beside it).

Both campaigns use it: a backup task's (:mod:`lab.campaign.conduct`, ``judged`` defaults to
its native/ build) and a fixture task's (:mod:`lab.workloads.campaign`, its own
``judged`` sentence).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from lab.evidence.signing import Signer
from lab.host.digest import sha256_file
from lab.model.campaign import Outcome, RepetitionRecord
from lab.model.processes import verification_commands
from lab.model.task import TaskEvaluation

#: the outcomes a second agent is asked to retry
ESCALATED: tuple[Outcome, ...] = ("failed", "timed-out", "plateaued", "build-failed")
#: where the second agent finds the package (its environment names the path)
ENV_NAME = "LAB_ESCALATION"
#: how much of each judged command's stdout and stderr the package keeps (their last bytes)
OUTPUT_TAIL = 16_384
#: what a backup task builds and judges (``constraints.json`` "judged")
NATIVE_JUDGED = (
    "native/ of the workspace against the baseline commit, built with make -C native in the "
    "sandbox and judged by the frozen evaluation; changes elsewhere are recorded, never built"
)

_README = """\
# Escalation package

A first agent worked on the task in TASK.md and did not meet it. This package is what the
lab observed of that run, signed by the lab (SHA256SUMS, SHA256SUMS.sig, lab.pub):

- TASK.md, constraints.json: the task, the clauses that decide success (and what each
  requires) and the commands that check them, the budget, what is built and judged
  (constraints.json "judged").
- patches/: every attempted patch (sN.patch: the workspace at snapshot N; final.patch:
  what the first agent left), each against the baseline commit.
- verification.json: per judged snapshot, whether it built and which clauses failed; and
  the final result's judgement (for a fixture task, each verification command's result
  and each clause's verdict with its reason; their output in verification/).
- stop.json: how the first run ended (outcome) and why.

Your workspace is fresh (the baseline). Your result is judged exactly like the first one.
"""


class PackagedTask(Protocol):
    """What the package says of a task (a backup task's or a fixture task's)."""

    @property
    def text(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


def needs_escalation(rep: RepetitionRecord) -> bool:
    return rep.outcome in ESCALATED


def _json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


def _patches(out: Path, rep_dir: Path) -> list[str]:
    """Copy the final patch and each judged snapshot's into ``out``; their names."""
    out.mkdir()
    names = []
    trajectory = rep_dir / "trajectory"
    shots = sorted(trajectory.glob("s*/native.patch"), key=lambda p: int(p.parent.name[1:]))
    for patch in shots:
        names.append(f"{patch.parent.name}.patch")
        shutil.copyfile(patch, out / names[-1])
    if (rep_dir / "native.patch").is_file():
        names.append("final.patch")
        shutil.copyfile(rep_dir / "native.patch", out / "final.patch")
    return names


def _judged(rep: RepetitionRecord) -> list[dict[str, Any]]:
    """A fixture task's judgement: per evaluation repetition, each command's result and each
    clause's verdict with its reason (empty for a backup task's)."""
    if not isinstance(rep.evaluation, TaskEvaluation):
        return []
    keep = ("exit_status", "timed_out", "passed", "sandbox_error")
    return [
        {
            "repetition": r.index,
            "commands": {
                cid: {
                    **{k: c.get(k) for k in keep},
                    "failed_tests": list(((c.get("report") or {}).get("failed")) or []),
                    "output": f"verification/r{r.index}/{cid}/",
                }
                for cid, c in sorted(r.commands.items())
            },
            "verdicts": {cid: v.to_dict() for cid, v in sorted(r.verdicts.items())},
        }
        for r in rep.evaluation.repetitions
    ]


def _outputs(out: Path, rep_dir: Path) -> None:
    """Each judged command's stdout and stderr (their last OUTPUT_TAIL bytes), a fixture
    task's (``judged/repetitions/rK/commands/ID/``)."""
    for stream in sorted((rep_dir / "judged" / "repetitions").glob("r*/commands/*/std*")):
        if stream.name not in ("stdout", "stderr") or not stream.is_file():
            continue
        kept = out / stream.parts[-4] / stream.parts[-2] / stream.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        with stream.open("rb") as f:
            f.seek(max(0, stream.stat().st_size - OUTPUT_TAIL))
            kept.write_bytes(f.read())


def _verification(rep: RepetitionRecord) -> dict[str, Any]:
    judged = [] if rep.trajectory is None else rep.trajectory.judged
    return {
        "snapshots": [
            {
                "snapshot": shot.index,
                "at_s": shot.at_s,
                "status": shot.status,
                "failed_clauses": sorted(c for c, v in shot.clauses.items() if v != "pass"),
                "patch": f"patches/s{shot.index}.patch",
            }
            for shot in judged
        ],
        "final": {
            "outcome": rep.outcome,
            "failed_clauses": dict(sorted(rep.failed_clauses.items())),
            "patch": "patches/final.patch",
            "judged": _judged(rep),
        },
    }


def write_package(
    out: Path,
    *,
    rep: RepetitionRecord,
    rep_dir: Path,
    task: PackagedTask,
    signer: Signer | None,
    judged: str = NATIVE_JUDGED,
) -> Path:
    """Write the package into ``out`` (created); signed when the run has a key. ``judged``
    says what of the workspace is built and judged, and how."""
    out.mkdir(parents=True)
    (out / "README.md").write_text(_README)
    (out / "TASK.md").write_text(task.text)
    record = task.to_dict()
    _json(
        out / "constraints.json",
        {
            "task": record,
            "clauses_deciding_success": list(record["clauses"]),
            "commands_deciding_success": [list(c) for c in verification_commands(record)],
            "judged": judged,
        },
    )
    _patches(out / "patches", rep_dir)
    _outputs(out / "verification", rep_dir)
    _json(out / "verification.json", _verification(rep))
    _json(
        out / "stop.json",
        {
            "outcome": rep.outcome,
            "reason": rep.reason,
            "agent_duration_s": rep.duration_s,
            "timed_out": rep.agent.timed_out,
        },
    )
    files = sorted(p for p in out.rglob("*") if p.is_file())
    sums = "".join(f"{sha256_file(p)}  {p.relative_to(out)}\n" for p in files)
    (out / "SHA256SUMS").write_text(sums)
    if signer is not None:
        signature = signer.sign_detached(sums.encode(), file_name="SHA256SUMS")
        (out / "SHA256SUMS.sig").write_text(signature)
        (out / "lab.pub").write_text(signer.public_key_file())
    return out


def escalate(
    rep: RepetitionRecord,
    *,
    rep_dir: Path,
    task: PackagedTask,
    signer: Signer | None,
    run: Callable[[Path], RepetitionRecord],
    say: Callable[[str], None],
    judged: str = NATIVE_JUDGED,
) -> RepetitionRecord:
    """Write ``rep``'s package, ``run`` the second agent with it, record its result as
    ``rep.escalation`` (``repetition.json`` rewritten with it)."""
    package = write_package(
        rep_dir / "escalation-package",
        rep=rep,
        rep_dir=rep_dir,
        task=task,
        signer=signer,
        judged=judged,
    )
    say(
        f"Repetition {rep.index}: {rep.outcome}; escalated to --escalate-cmd with the signed "
        f"evidence package (repetitions/r{rep.index}/escalation-package)"
    )
    second = run(package)
    rep = dataclasses.replace(rep, escalation=second)
    _json(rep_dir / "repetition.json", rep.to_dict())
    say(f"Repetition {rep.index}, escalated: {second.outcome} — {second.reason}")
    return rep
