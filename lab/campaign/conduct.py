"""``lab campaign`` end to end: check the instrument and the baseline once, then per
repetition a fresh workspace, the agent in the sandbox, its patch and bundle, and the
candidate built and judged exactly as ``lab evaluate`` judges one; then the signed archive.

    outcome = execute(CampaignRequest(task_path=Path("campaigns/speedup.yaml"),
                                      agent_cmd="sh my-agent.sh", repetitions=3),
                      say=print, echo=print)
    outcome.exit_status          # 0 when at least --require repetitions met the task
    outcome.campaign.met, outcome.archive.path

``execute`` prints nothing itself: progress goes to ``say``, the agent's output lines (live,
prefixed with the repetition) to ``echo``, and the CLI draws the outcome. The outcome of a
repetition is the verified result of its candidate, never the agent's own exit status.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import resources
from lab.campaign import in_image, workspace
from lab.campaign.agent import agent_argv, run_agent, sandboxed_make
from lab.campaign.escalate import ENV_NAME, escalate, needs_escalation
from lab.campaign.observe import Observation, snapshot_judge
from lab.campaign.outcome import after_judging, before_judging, speed_met
from lab.campaign.records import agent_record, dependencies, native_record, patch_record
from lab.campaign.settle import Settings, evaluation_options, settle
from lab.campaign.shard import CampaignShard, plan_shard
from lab.campaign.task import CampaignRequest, Task, load_task
from lab.errors import CampaignError
from lab.evaluate.candidate import build, prepare
from lab.evaluate.instrument import run_check
from lab.evaluate.judge import freeze, frozen_limits, judge_built
from lab.evaluate.verdicts import CALIBRATION_SCENARIOS, failed_clauses
from lab.evidence.archive import ArchiveInfo
from lab.evidence.test_result import write_test_results
from lab.host import identity, procs
from lab.host.clock import epoch_to_rfc3339
from lab.model import RunResult, ScenarioResult
from lab.model.campaign import AgentRecord, CampaignRecord, Outcome, PatchRecord, RepetitionRecord
from lab.model.evaluation import Evaluation, FrozenEvaluation
from lab.pipeline import (
    Setup,
    finish,
    make_result,
    new_run_id,
    open_run,
    setup,
)
from lab.run.options import check_client
from lab.run.shard import check_run_id
from lab.sandbox import boxfs, cell_dirs
from lab.workloads.backup import scenario

#: what a campaign record holds once its repetitions ran (not in ``campaign/campaign.json``)
_RESULTS = ("repetitions", "met", "succeeded", "outcomes", "clauses", "duration_s", "escalation")


@dataclass(frozen=True)
class CampaignOutcome:
    exit_status: int
    campaign: CampaignRecord | None = None
    result: RunResult | None = None
    run_dir: Path | None = None
    archive: ArchiveInfo | None = None
    #: the lab image's ``--json`` document (host paths), when delegated with ``json``
    document: dict[str, Any] | None = None


def execute(
    request: CampaignRequest, *, say: Callable[[str], None], echo: Callable[[str], None]
) -> CampaignOutcome:
    """Check, run every repetition, judge, write and sign; print nothing."""
    if not request.task_path.is_file():
        raise CampaignError(f"{request.task_path}: no such task file; give a campaigns/*.yaml.")
    task = load_task(request.task_path)
    settings = settle(request, task)
    if not request.agent_cmd.strip():
        raise CampaignError("--agent-cmd is empty; give the command that runs the agent.")
    if not request.local and not identity.in_lab_image():
        return _in_image(request)
    check_client(resources.native_client())
    ev = settings.evaluation
    conditions = scenario.select(resources.scenarios_dir() / "candidate", [], True)
    calibration = scenario.select(resources.scenarios_dir(), list(CALIBRATION_SCENARIOS), False)
    limits = frozen_limits(ev)
    frozen = freeze(conditions, size=ev.size, repetitions=ev.repetitions, limits=limits)
    # a shard's repetitions and ids are settled before anything is written or started
    part = None if request.shard is None else plan_shard(request, task, settings, frozen)
    prepared = setup(ev.collector, ev.packets, archive=True, say=say)
    if part is not None:
        run_id = part.run_id
    else:
        run_id = check_run_id(request.run_id) if request.run_id else new_run_id("campaign")
    # the agent and every result it builds only ever run in the sandbox
    run_dir = open_run(prepared, request.out, run_id, sandbox="required")
    try:
        campaign = _Campaign(request, task, settings, prepared, frozen, run_id, run_dir, say, echo)
        campaign.part = part
        return campaign.conduct(conditions, calibration)
    finally:
        prepared.close()


class _Campaign:
    def __init__(
        self,
        request: CampaignRequest,
        task: Task,
        settings: Settings,
        prepared: Setup,
        frozen: FrozenEvaluation,
        run_id: str,
        run_dir: Path,
        say: Callable[[str], None],
        echo: Callable[[str], None],
    ) -> None:
        self.request = request
        self.task = task
        self.settings = settings
        self.prepared = prepared
        self.frozen = frozen
        self.run_id = run_id
        self.run_dir = run_dir
        self.say = say
        self.echo = echo
        self.log = procs.CommandLog(run_dir / "commands.jsonl", root=run_dir)
        #: a shard (``--shard I/N``) conducts only its repetitions
        self.part: CampaignShard | None = None

    def conduct(
        self, conditions: list[scenario.Scenario], calibration: list[scenario.Scenario]
    ) -> CampaignOutcome:
        started = time.time()
        ev = self.settings.evaluation
        (self.run_dir / "evaluation.json").write_text(
            json.dumps(self.frozen.to_dict(), indent=2, sort_keys=True) + "\n"
        )
        (self.run_dir / "campaign").mkdir()
        (self.run_dir / "campaign" / "task.yaml").write_text(self.task.raw)
        check, cal_results = run_check(ev, self.prepared, self.run_dir, calibration, self.say)
        if not check.ok:
            raise CampaignError(
                "the instrument did not catch the seeded defects on this machine with these "
                f"collectors, so the campaign refuses to start (evidence kept in {self.run_dir})."
            )
        baseline_status, base_results = self._baseline(conditions)
        with tempfile.TemporaryDirectory(prefix="lab-agent-files-") as probe:
            _, files = agent_argv(self.request.agent_cmd, Path(probe), cwd=Path.cwd())
        record = CampaignRecord(
            task=self.task.to_dict(),
            agent_command=self.request.agent_cmd,
            escalate_command=self.request.escalate_cmd,
            agent_files=dict(sorted(files.items())),
            agent_network=self.request.agent_network,
            agent_env=self.request.agent_env,
            budget_s=self.settings.budget_s,
            requested=self.settings.repetitions,
            required=self.settings.required,
            evaluation_id=self.frozen.evaluation_id,
            evaluation_options=evaluation_options(ev),
            instrument_check=check.to_dict(),
            baseline={"must": self.task.baseline_must, "status": baseline_status, "shown": True},
        )
        # the configuration, written before the agent first runs
        config = {k: v for k, v in record.to_dict().items() if k not in _RESULTS}
        (self.run_dir / "campaign" / "campaign.json").write_text(
            json.dumps(config, indent=2, sort_keys=True) + "\n"
        )
        indices = list(range(1, self.settings.repetitions + 1))
        if self.part is not None:
            indices = self.part.indices
            self.say(
                f"Shard {self.part.spec} of campaign {self.part.frozen_id}: repetition(s) "
                + ", ".join(map(str, indices))
            )
        for index in indices:
            record.repetitions.append(
                self._escalate(self._repetition(index, conditions), conditions)
            )
        return self._finish(record, cal_results + base_results, conditions, started)

    def _baseline(self, conditions: list[scenario.Scenario]) -> tuple[str, list[ScenarioResult]]:
        """Judge the unchanged client; refuse to start when it does not show what the task
        requires (a speed-up task: it passes; a bug-fix task: it fails)."""
        ev = self.settings.evaluation
        self.say(f"Baseline: the unchanged client must {self.task.baseline_must} the contract")
        client = resources.native_client()
        record = Evaluation(frozen=self.frozen, candidate=native_record(), status="fail")
        base_dir = self.run_dir / "baseline"
        base_dir.mkdir()
        judged, results = judge_built(
            ev,
            record,
            client,
            self.prepared,
            base_dir,
            conditions,
            self.say,
            untimed="not timed: this is the baseline itself",
        )
        failed = {c: w for c, w in failed_clauses(results).items() if c in self.task.clauses}
        status = "fail" if failed else "pass"
        if status != self.task.baseline_must:
            raise CampaignError(
                f"the baseline does not show what {self.task.path.name} requires: the unchanged "
                f"client must {self.task.baseline_must} the contract but its result was "
                f"{status} ({judged.status_reason or 'every clause passed'}); the campaign "
                f"refuses to start (evidence kept in {self.run_dir})."
            )
        return status, results

    def _escalate(
        self, rep: RepetitionRecord, conditions: list[scenario.Scenario]
    ) -> RepetitionRecord:
        """``rep`` as it is, or escalated (``--escalate-cmd``) when it did not meet the task."""
        if not self.request.escalate_cmd or not needs_escalation(rep):
            return rep
        rep_dir = self.run_dir / "repetitions" / f"r{rep.index}"
        run = lambda package: self._repetition(rep.index, conditions, package=package)  # noqa: E731
        return escalate(rep, rep_dir=rep_dir, task=self.task, signer=self.prepared.signer,
                        run=run, say=self.say)  # fmt: skip

    def _repetition(
        self, index: int, conditions: list[scenario.Scenario], package: Path | None = None
    ) -> RepetitionRecord:
        """One agent run; with ``package``, the escalated run (``--escalate-cmd``) in
        ``rN/escalation/``, the package read-only at ``$LAB_ESCALATION``."""
        rep_dir = self.run_dir / "repetitions" / f"r{index}"
        rep_dir = rep_dir if package is None else rep_dir / "escalation"
        rep_dir.mkdir(parents=True)
        sandbox = self.prepared.sandbox
        assert sandbox is not None
        scratch = Path(tempfile.mkdtemp(prefix="lab-agent-"))
        env = tuple((name, os.environ[name]) for name in self.request.agent_env)
        command = self.request.agent_cmd
        try:
            box, home, tmp = cell_dirs(scratch, sandbox)
            if package is not None and self.request.escalate_cmd:
                shutil.copytree(package, box / "escalation")
                env, command = (
                    (*env, (ENV_NAME, str(box / "escalation"))),
                    self.request.escalate_cmd,
                )
            ws = workspace.create(
                scratch, self.task.text, uid=sandbox.user.uid, gid=sandbox.user.gid, log=self.log
            )
            manifest = {"baseline_commit": ws.baseline_commit, "files": ws.manifest}
            (rep_dir / "workspace.json").write_text(
                json.dumps(manifest, indent=2, sort_keys=True) + "\n"
            )
            argv, _ = agent_argv(command, box, cwd=Path.cwd())
            seen = Observation(
                self.request, self.task, ws, scratch=scratch, rep_dir=rep_dir,
                run_dir=self.run_dir, log=self.log, judge=snapshot_judge(
                    prepared=self.prepared, frozen=self.frozen, evaluation=self.settings.evaluation,
                    clauses=self.task.clauses, conditions=conditions, index=index, log=self.log,
                ),
            )  # fmt: skip
            seen.start()
            self.say(
                f"Repetition {index}/{self.settings.repetitions}: the agent starts in a fresh "
                f"workspace (baseline {ws.baseline_commit[:12]}, budget "
                f"{self.settings.budget_s:g} s, network {self.request.agent_network})"
            )
            ran = run_agent(
                sandbox,
                argv,
                workspace=ws.root,
                box=box,
                home=home,
                tmp=tmp,
                repetition=index,
                budget_s=self.settings.budget_s,
                network=self.request.agent_network,
                env=env,
                stdout=rep_dir / "agent.stdout",
                stderr=rep_dir / "agent.stderr",
                echo=self.echo,
                **seen.run_kwargs(),
            )
            seen.agent_done()
            agent = agent_record(ran, rep_dir / "agent.stderr")
            self.say(
                f"Repetition {index}: the agent "
                + (
                    "reached the budget and was killed"
                    if agent.timed_out
                    else f"exited {agent.exit_status}"
                )
                + f" after {agent.duration_s:.1f} s"
            )
            capture = workspace.take(ws, rep_dir, log=self.log)
            patch = patch_record(capture)
            rep = self._judge(index, rep_dir, ws.baseline_commit, agent, patch, conditions)
            rep = seen.finish(rep, self.say)
        finally:
            boxfs.remove_tree(scratch, log=self.log)
        (rep_dir / "repetition.json").write_text(
            json.dumps(rep.to_dict(), indent=2, sort_keys=True) + "\n"
        )
        self.say(f"Repetition {index}: {rep.outcome} — {rep.reason}")
        return rep

    def _judge(
        self,
        index: int,
        rep_dir: Path,
        commit: str,
        agent: AgentRecord,
        patch: PatchRecord,
        conditions: list[scenario.Scenario],
    ) -> RepetitionRecord:
        def done(outcome: Outcome, reason: str, **kw: Any) -> RepetitionRecord:
            return RepetitionRecord(
                index=index,
                outcome=outcome,
                reason=reason,
                failed_clauses=kw.pop("failed", {}),
                baseline_commit=commit,
                agent=agent,
                patch=patch,
                **kw,
            )

        early = before_judging(agent, patch, budget_s=self.settings.budget_s)
        if early is not None:
            return done(*early)
        ev = self.settings.evaluation
        with tempfile.TemporaryDirectory(prefix="lab-candidate-") as tmp:
            candidate = prepare("patch", rep_dir / "native.patch", Path(tmp), self.log)
            for name in ("patch.log", "patch.err"):
                if (Path(tmp) / name).exists():
                    (rep_dir / "candidate").mkdir(exist_ok=True)
                    shutil.copyfile(Path(tmp) / name, rep_dir / "candidate" / name)
            assert self.prepared.sandbox is not None
            maker = sandboxed_make(self.prepared.sandbox, index, candidate.workspace)
            build(candidate, self.log, rep_dir / "candidate", make_runner=maker)
            if candidate.binary is None:
                status = candidate.build.status or "build-failed"
                return done(
                    "build-failed",
                    f"the candidate could not be built ({status}); see candidate/build.log",
                )
            shutil.copyfile(candidate.binary, rep_dir / "candidate" / "candidate-client")
            record = Evaluation(frozen=self.frozen, candidate=candidate.describe(), status="fail")
            judged_dir = rep_dir / "judged"
            judged_dir.mkdir()
            speed = self.task.speed
            judged, results = judge_built(
                ev,
                record,
                candidate.binary,
                self.prepared,
                judged_dir,
                conditions,
                self.say,
                timing_size=None if speed is None else speed.size,
            )
        failed = {c: w for c, w in failed_clauses(results).items() if c in self.task.clauses}
        metric = "first_backup_wall" if speed is None else speed.metric
        ratio = (judged.timing.ratio or {}).get(metric) if judged.timing else None
        bar = (judged.timing.ratio_interval or {}).get(metric) if judged.timing else None
        outcome, why = after_judging(agent, failed, speed, ratio, bar)
        return done(
            outcome,
            why,
            failed=failed,
            evaluation=judged,
            timing_ratio=ratio,
            timing_ratio_interval=bar,
            speed_met=speed_met(speed, ratio, bar),
        )

    def _finish(
        self,
        record: CampaignRecord,
        scenario_results: list[ScenarioResult],
        conditions: list[scenario.Scenario],
        started: float,
    ) -> CampaignOutcome:
        ev = self.settings.evaluation
        result = make_result(
            run_id=self.run_id,
            started=epoch_to_rfc3339(started),
            options={
                **ev.options("campaign", [s.name for s in conditions]),
                "agent_command": record.agent_command,
                "agent_network": record.agent_network,
                "agent_repetitions": record.requested,
                "budget_s": record.budget_s,
                "require": record.required,
                "task": self.task.path.name,
                "task_sha256": self.task.sha256,
            },
            prepared=self.prepared,
            packets=ev.packets,
            scenario_results=scenario_results,
            client=resources.native_client(),
        )
        result.campaign = record
        write_test_results(self.run_dir, record, self.prepared.signer)  # beside the provenance
        result.shard = None if self.part is None else self.part.record
        archive = finish(
            result,
            self.run_dir,
            signer=self.prepared.signer,
            started_epoch=started,
            say=self.say,
            dependencies=dependencies(self.task, record),
        )
        # a shard's own agent runs decide its exit status (each must meet the task); whether
        # the campaign met --require is the merge's to say, over every shard's runs
        met = record.succeeded if self.part is None else record.met == record.total
        return CampaignOutcome(
            exit_status=0 if met else 1,
            campaign=record,
            result=result,
            run_dir=self.run_dir,
            archive=archive,
        )


def _in_image(request: CampaignRequest) -> CampaignOutcome:
    status, document = in_image.delegate(request)
    return CampaignOutcome(exit_status=status, document=document)
