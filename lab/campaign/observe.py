"""Everything the lab watches of one repetition's agent besides its output, in one place
for ``lab.campaign.conduct``: its network (``--agent-network model=…``), its processes, its
workspace over time (snapshots, judged afterwards, or while it works with
``--stop-on-plateau K``), and what they make of the repetition's record.

    seen = Observation(request, task, ws, scratch=scratch, rep_dir=rep_dir, run_dir=run_dir,
                       log=log, judge=snapshot_judge(...))
    seen.start()
    ran = run_agent(..., **seen.run_kwargs())
    seen.agent_done()
    rep = seen.finish(judged_rep, say)     # egress, processes, trajectory; plateaued?
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.campaign.agent import egress_witness, sandboxed_make
from lab.campaign.snapshots import (
    Known,
    PlateauWatch,
    SnapshotJudge,
    Snapshotter,
    judge_trajectory,
)
from lab.campaign.task import CampaignRequest, Task
from lab.campaign.watch import ProcessWitness
from lab.campaign.workspace import Workspace
from lab.evaluate.candidate import build, prepare
from lab.evaluate.judge import judge_built
from lab.evaluate.request import EvaluationRequest
from lab.evaluate.verdicts import failed_clauses
from lab.host import procs
from lab.model.campaign import RepetitionRecord
from lab.model.evaluation import Evaluation, FrozenEvaluation
from lab.model.trajectory import PLATEAU_K, JudgedSnapshot, Snapshot
from lab.pipeline import Setup
from lab.reports.campaign_watch import watched_lines
from lab.workloads.backup import scenario


def snapshot_judge(
    *,
    prepared: Setup,
    frozen: FrozenEvaluation,
    evaluation: EvaluationRequest,
    clauses: tuple[str, ...],
    conditions: list[scenario.Scenario],
    index: int,
    log: procs.CommandLog,
) -> SnapshotJudge:
    """A snapshot's native.patch built and judged like the final result (sandboxed, no
    network), untimed; its evidence in the snapshot's directory."""

    def judge(patch: Path, where: Path) -> tuple[str, dict[str, str]]:
        assert prepared.sandbox is not None
        with tempfile.TemporaryDirectory(prefix="lab-snapshot-") as tmp:
            candidate = prepare("patch", patch, Path(tmp), log)
            maker = sandboxed_make(prepared.sandbox, index, candidate.workspace)
            build(candidate, log, where / "candidate", make_runner=maker)
            if candidate.binary is None:
                return "build-failed", {}
            record = Evaluation(frozen=frozen, candidate=candidate.describe(), status="fail")
            (where / "judged").mkdir()
            _, results = judge_built(
                evaluation, record, candidate.binary, prepared, where / "judged", conditions,
                lambda _: None, untimed="not timed: a snapshot of the trajectory",
            )  # fmt: skip
        failed = failed_clauses(results)
        return "judged", {c: "fail" if c in failed else "pass" for c in clauses}

    return judge


class Observation:
    def __init__(
        self,
        request: CampaignRequest,
        task: Task,
        ws: Workspace,
        *,
        scratch: Path,
        rep_dir: Path,
        run_dir: Path,
        log: procs.CommandLog,
        judge: SnapshotJudge,
    ) -> None:
        self.rep_dir = rep_dir
        self.judge = judge
        self.witness = egress_witness(request.agent_network, rep_dir, run_dir, log)
        self.processes = ProcessWitness(out_dir=rep_dir / "processes", log=log,
                                        task=task.to_dict())  # fmt: skip
        self.shots = Snapshotter(ws, scratch, log=log)
        self.k = request.stop_on_plateau
        self.clauses = task.clauses
        self.watch: PlateauWatch | None = None
        self.judged: list[JudgedSnapshot] | None = None
        self.taken: list[Snapshot] = []

    def start(self) -> None:
        self.shots.start()
        if self.k is not None:
            self.watch = PlateauWatch(self.shots, self.rep_dir / "trajectory", self.judge,
                                      k=self.k, stop=self.processes.kill)  # fmt: skip
            self.watch.start()

    def run_kwargs(self) -> dict[str, Any]:
        return {"witness": self.witness, "processes": self.processes}

    def agent_done(self) -> None:
        self.judged = None if self.watch is None else self.watch.finish()
        self.taken = self.shots.stop()

    def _final(self, rep: RepetitionRecord) -> Known:
        """The final result's judgement by its tree, so an equal snapshot is not judged
        again (the final result is judged with timing; a snapshot without)."""
        final = None if rep.patch is None else rep.patch.final_commit
        if final is None:
            return {}
        if rep.outcome == "build-failed":
            return {self.shots.tree_of(final): ("build-failed", {})}
        if rep.evaluation is None or rep.outcome not in ("met", "failed", "agent-crashed"):
            return {}
        clauses = {c: "fail" if c in rep.failed_clauses else "pass" for c in self.clauses}
        return {self.shots.tree_of(final): ("judged", clauses)}

    def finish(self, rep: RepetitionRecord, say: Callable[[str], None]) -> RepetitionRecord:
        say(f"Repetition {rep.index}: judging the trajectory ({len(self.taken)} snapshot(s))")
        k = self.k or PLATEAU_K
        trajectory = judge_trajectory(self.shots, self.taken, self.rep_dir / "trajectory",
                                      self.judge, plateau_k=k, judged=self.judged,
                                      known=self._final(rep))  # fmt: skip
        if self.watch is not None and self.watch.stopped_at is not None:
            rep = dataclasses.replace(
                rep,
                outcome="plateaued",
                reason=f"stopped on a plateau at snapshot {self.watch.stopped_at}: {k} judged "
                "snapshots in a row without a new passing clause (--stop-on-plateau); its "
                f"result, judged like any other: {rep.outcome} — {rep.reason}",
            )
        rep = dataclasses.replace(
            rep,
            egress=None if self.witness is None else self.witness.record,
            processes=self.processes.record,
            trajectory=trajectory,
        )
        for line in watched_lines(rep):
            say(line)
        return rep
