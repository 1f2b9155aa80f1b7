"""``lab campaign --task campaigns/*/task.yaml``: the second article's experiment on any
fixture task. The task is checked first (its untouched fixture must fail; its seeded patches
must break what they name), then per repetition a fresh git workspace holding only the
fixture and TASK.md (the same baseline commit every time), the agent in the sandbox, its
patch and bundle kept whatever happened, and its result judged exactly as ``lab evaluate
--task --patch`` judges one: a repetition that timed out is judged too.

    outcome = execute(CampaignRequest(task_path=Path("campaigns/safe-store/task.yaml"),
                                      agent_cmd="sh agent.sh", repetitions=3, local=True),
                      say=print, echo=print)
    outcome.campaign.met, outcome.exit_status        # 0 when at least --require met it

With ``--escalate-cmd CMD2`` a repetition that failed or timed out is handed to a second
agent in a fresh workspace with the signed evidence package of :mod:`lab.campaign.escalate`
(the task, its clauses and verification commands, each patch, the verification failures,
the stop reason) at ``$LAB_ESCALATION``, judged by the same gates (``rN/escalation/``).
With ``--shard I/N`` it conducts only its repetitions (:mod:`lab.campaign.shard`, as a backup
campaign does) and ``lab merge`` writes the shards as one campaign (:mod:`lab.merge.task`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.campaign import in_image, workspace
from lab.campaign.agent import agent_argv, run_agent
from lab.campaign.conduct import CampaignOutcome
from lab.campaign.escalate import ENV_NAME, escalate, needs_escalation
from lab.campaign.outcome import after_judging, crashed
from lab.campaign.records import agent_record, patch_record
from lab.campaign.shard import CampaignShard, plan_repetitions
from lab.campaign.task import CampaignRequest
from lab.campaign.workspace import Workspace
from lab.errors import CampaignError, UsageError
from lab.host import identity
from lab.model.campaign import (
    AgentRecord,
    CampaignRecord,
    Outcome,
    PatchRecord,
    RepetitionRecord,
)
from lab.run.options import check_count
from lab.sandbox import Sandbox, SandboxSettings, boxfs, cell_dirs
from lab.workloads.calcache import evaluation_id
from lab.workloads.calibrate import Calibration
from lab.workloads.evaluate import TaskRun, check_task, keep_calibration, open_task_run
from lab.workloads.evidence import write_task_run
from lab.workloads.judge import judge, prepare
from lab.workloads.task import FixtureTask, load_fixture_task
from lab.workloads.verify import limits_under

#: where each of the article's nine evidence items lives in a fixture-task campaign
EVIDENCE: tuple[tuple[str, str], ...] = (
    (
        "the initial repository state",
        "repetitions/rN/workspace.json (every file given, its "
        "SHA-256, the baseline commit); the first commit of repetitions/rN/final.bundle",
    ),
    (
        "the exact task and configuration",
        "task/task.yaml, campaign/campaign.json (agent "
        "command, its files, budget, network, repetitions), written before the agent first runs",
    ),
    (
        "a clean workspace per repetition",
        "repetitions/rN/workspace.json: the fixture and "
        "TASK.md only, the same baseline commit id every time",
    ),
    (
        "the agent's stdout, stderr, exit code and duration",
        "repetitions/rN/agent.stdout, agent.stderr; repetitions/rN/repetition.json (agent)",
    ),
    (
        "the patch, including failed runs",
        "repetitions/rN/patch.diff for every outcome, timed-out ones included",
    ),
    (
        "deterministic verification commands and their outputs",
        "commands.jsonl; "
        "repetitions/rN/judged/repetitions/rK/commands/ID/{stdout,stderr} and oracle/; "
        "baseline/ and calibration/ for the task itself",
    ),
    (
        "a final snapshot that can be restored independently",
        "repetitions/rN/final.bundle (git clone final.bundle: baseline and final commits)",
    ),
    ("what the contract does not prove", "report.md, section 'What this campaign does not prove'"),
    (
        "repetition before any reliability claim",
        "results.json campaign.met / campaign.repetitions and per-clause k/N; report.md",
    ),
)
NOT_PROVEN: tuple[str, ...] = (
    "The clauses judge the fixture's own tests (protected copies restored), go vet and the "
    "workload's oracle under the lab's names and attacker on this machine; they bound, but "
    "do not prove, correctness against other inputs, attackers or machines.",
    "The agent's own explanation, commits and exit status are kept but never judged: the "
    "outcome is the verified result of its patch.",
    "k of N says how often this agent met this task with this budget here; N repetitions "
    "bound, but do not measure exactly, how often it would on the next try.",
)
#: what a fixture task's campaign builds and judges (the escalation package says it)
JUDGED = (
    "the whole workspace against the baseline commit (patches/final.patch), judged like lab "
    "evaluate --task --patch: the protected files restored, each verification command run in "
    "the sandbox without network, and the workload's oracle where a clause names none"
)


def execute(
    request: CampaignRequest, *, say: Callable[[str], None], echo: Callable[[str], None]
) -> CampaignOutcome:
    task = load_fixture_task(request.task_path)
    repetitions, required, budget = _settle(request, task)
    if not request.local and not identity.in_lab_image():
        status, document = in_image.delegate(request)  # the image holds Go (golang-go)
        return CampaignOutcome(exit_status=status, document=document)
    part = _plan(request, task, repetitions, required, budget)
    run_id = request.run_id if part is None else part.run_id
    run = open_task_run(task, request.out, run_id, "campaign", say)
    try:
        baseline, check = check_task(
            run, calibrate_it=True, say=say, recalibrate=request.recalibrate
        )
        with tempfile.TemporaryDirectory(prefix="lab-agent-files-") as probe:
            _, files = agent_argv(request.agent_cmd, Path(probe), cwd=Path.cwd())
        record = CampaignRecord(
            task=task.to_dict(),
            agent_command=request.agent_cmd,
            escalate_command=request.escalate_cmd,
            agent_files=dict(sorted(files.items())),
            agent_network=request.agent_network,
            agent_env=request.agent_env,
            budget_s=budget,
            requested=repetitions,
            required=required,
            evaluation_id=evaluation_id(task, run.verifier.limits()),
            evaluation_options={
                "repetitions": task.eval_repetitions,
                "limits": run.verifier.limits(),
            },
            instrument_check={} if check is None else check.to_dict(),
            baseline={"must": "fail", "status": baseline["status"], "shown": True},
        )
        (run.run_dir / "campaign").mkdir()
        (run.run_dir / "campaign" / "campaign.json").write_text(
            json.dumps(campaign_document(record), indent=2, sort_keys=True) + "\n"
        )
        indices = list(range(1, repetitions + 1)) if part is None else part.indices
        if part is not None:
            shown = ", ".join(map(str, indices))
            say(f"Shard {part.spec} of campaign {part.frozen_id}: repetition(s) {shown}")
        for index in indices:
            first = _repetition(run, request, budget, index, say, echo)
            record.repetitions.append(_escalate(run, request, budget, first, say, echo))
        archive = _finish(run, record, check, say, part)
    finally:
        run.close()
    # a shard's own runs decide its exit status; --require over all runs is the merge's
    met = record.succeeded if part is None else record.met == record.total
    return CampaignOutcome(
        exit_status=0 if met else 1,
        campaign=record,
        run_dir=run.run_dir,
        archive=archive,
    )


def _settle(request: CampaignRequest, task: FixtureTask) -> tuple[int, int, float]:
    if request.escalate_cmd is not None and not request.escalate_cmd.strip():
        raise UsageError("--escalate-cmd is empty; give the command that runs the second agent.")
    repetitions = request.repetitions or task.repetitions
    check_count(repetitions, "--repetitions")
    required = repetitions if request.require is None else request.require
    if not 1 <= required <= repetitions:
        raise UsageError(
            f"--require {required} must be between 1 and --repetitions ({repetitions})."
        )
    budget = request.budget_s if request.budget_s is not None else task.budget_s
    if not 0 < budget <= 86_400:
        raise UsageError(f"--budget {budget:g} must be more than 0 and at most 86400 seconds.")
    for name in request.agent_env:
        if name.startswith("LAB_") or name not in os.environ:
            raise UsageError(
                f"--agent-env {name!r} must name a set variable not starting with LAB_."
            )
    if not request.agent_cmd.strip():
        raise CampaignError("--agent-cmd is empty; give the command that runs the agent.")
    return repetitions, required, budget


def _escalate(
    run: TaskRun,
    request: CampaignRequest,
    budget: float,
    rep: RepetitionRecord,
    say: Callable[[str], None],
    echo: Callable[[str], None],
) -> RepetitionRecord:
    """``rep`` as it is, or escalated (``--escalate-cmd``) when it did not meet the task."""
    if not request.escalate_cmd or not needs_escalation(rep):
        return rep
    rep_dir = run.run_dir / "repetitions" / f"r{rep.index}"
    again = lambda package: _repetition(run, request, budget, rep.index, say, echo, package)  # noqa: E731
    return escalate(rep, rep_dir=rep_dir, task=run.task, signer=run.prepared.signer,
                    run=again, say=say, judged=JUDGED)  # fmt: skip


def _plan(
    request: CampaignRequest, task: FixtureTask, repetitions: int, required: int, budget: float
) -> CampaignShard | None:
    """A shard's repetitions and the run id its shards share (as a backup campaign's:
    :mod:`lab.campaign.shard`), settled before anything is written or started."""
    if request.shard is None:
        return None
    return plan_repetitions(
        request,
        evaluation_id=evaluation_id(task, limits_under(SandboxSettings())),
        task_sha256=task.sha256,
        budget_s=budget,
        repetitions=repetitions,
        required=required,
    )


def _repetition(
    run: TaskRun,
    request: CampaignRequest,
    budget: float,
    index: int,
    say: Callable[[str], None],
    echo: Callable[[str], None],
    package: Path | None = None,
) -> RepetitionRecord:
    """One agent run; with ``package``, the escalated run (``--escalate-cmd``) in
    ``rN/escalation/``, the package read-only at ``$LAB_ESCALATION``."""
    rep_dir = run.run_dir / "repetitions" / f"r{index}"
    rep_dir = rep_dir if package is None else rep_dir / "escalation"
    rep_dir.mkdir(parents=True)
    sandbox = run.prepared.sandbox
    assert sandbox is not None
    scratch = Path(tempfile.mkdtemp(prefix="lab-agent-"))
    try:
        box, home, tmp = cell_dirs(scratch, sandbox)
        env, command = _agent(request, box, package)
        ws = _workspace(run, scratch, sandbox, rep_dir)
        argv, _ = agent_argv(command, box, cwd=Path.cwd())
        say(
            f"Repetition {index}: the agent starts (baseline {ws.baseline_commit[:12]}, "
            f"budget {budget:g} s)"
        )
        ran = run_agent(
            sandbox,
            argv,
            workspace=ws.root,
            box=box,
            home=home,
            tmp=tmp,
            repetition=index,
            budget_s=budget,
            network=request.agent_network,
            env=env,
            stdout=rep_dir / "agent.stdout",
            stderr=rep_dir / "agent.stderr",
            echo=echo,
        )
        agent = agent_record(ran)
        capture = workspace.take(ws, rep_dir, log=run.log, built=".")
    finally:
        boxfs.remove_tree(scratch, log=sandbox.log)
    patch = patch_record(capture)
    rep = _judge(run, rep_dir, index, ws.baseline_commit, agent, patch, budget, say)
    (rep_dir / "repetition.json").write_text(
        json.dumps(rep.to_dict(), indent=2, sort_keys=True) + "\n"
    )
    say(f"Repetition {index}: {rep.outcome} — {rep.reason}")
    return rep


def _workspace(run: TaskRun, scratch: Path, sandbox: Sandbox, rep_dir: Path) -> Workspace:
    """The fixture and TASK.md in a fresh git repository (the same baseline commit every
    time), its manifest in ``rep_dir/workspace.json``."""
    task = run.task
    ws = workspace.create(
        scratch,
        task.text,
        uid=sandbox.user.uid,
        gid=sandbox.user.gid,
        log=run.log,
        source=task.fixture_dir,
        files=workspace.fixture_files(task.fixture_dir),
        gitignore="",
    )
    manifest_doc = {"baseline_commit": ws.baseline_commit, "files": ws.manifest}
    (rep_dir / "workspace.json").write_text(json.dumps(manifest_doc, indent=2) + "\n")
    return ws


def _agent(
    request: CampaignRequest, box: Path, package: Path | None
) -> tuple[tuple[tuple[str, str], ...], str]:
    """The environment and command of one run: the agent's, or with ``package`` the second
    agent's (``--escalate-cmd``), the package copied into its box at ``$LAB_ESCALATION``."""
    env = tuple((name, os.environ[name]) for name in request.agent_env)
    if package is None or not request.escalate_cmd:
        return env, request.agent_cmd
    shutil.copytree(package, box / "escalation")
    return (*env, (ENV_NAME, str(box / "escalation"))), request.escalate_cmd


def _judge(
    run: TaskRun,
    rep_dir: Path,
    index: int,
    commit: str,
    agent: AgentRecord,
    patch: PatchRecord,
    budget: float,
    say: Callable[[str], None],
) -> RepetitionRecord:
    """The patch judged whatever the agent did (a time-out included); the outcome from
    what was verified, never from the agent's exit status."""
    task = run.task
    judged = None
    outcome: Outcome
    if patch.problem is None:
        with tempfile.TemporaryDirectory(prefix="lab-cand-", dir=run.verifier.work) as tmp:
            cand = prepare(task, "patch", rep_dir / "patch.diff", Path(tmp), log=run.log)
            judged = judge(
                task,
                cand,
                run.verifier,
                rep_dir / "judged",
                repetitions=task.eval_repetitions,
                say=say,
            )
    failed = (
        {c: "not judged" for c in task.success} if judged is None else judged.failed(task.success)
    )
    if judged is not None and judged.candidate.problem is not None:
        failed = {"patch": judged.candidate.problem}
    if agent.timed_out:
        verified = (
            "its patch met the task"
            if not failed
            else "; ".join(f"{c} {w}" for c, w in failed.items())
        )
        outcome, why = (
            "timed-out",
            f"the budget of {budget:g} s ran out (judged anyway: {verified})",
        )
    elif patch.problem is not None:
        outcome, why = "failed", patch.problem
    elif judged is not None and not judged.candidate.files_changed and crashed(agent):
        outcome = "agent-crashed"
        why = f"the agent exited {agent.exit_status} and left the fixture as it was given"
    elif judged is not None and not judged.candidate.files_changed:
        outcome, why = "no-change", "the agent left the fixture as it was given"
    else:
        outcome, why = after_judging(agent, failed, None, None)
    return RepetitionRecord(
        index=index,
        outcome=outcome,
        reason=why,
        failed_clauses=failed,
        baseline_commit=commit,
        agent=agent,
        patch=patch,
        evaluation=judged,
    )


def campaign_document(record: CampaignRecord) -> dict[str, Any]:
    doc = record.to_dict()
    doc["evidence"] = [{"item": item, "where": where} for item, where in EVIDENCE]
    doc["not_proven"] = list(NOT_PROVEN)
    return doc


def _finish(
    run: TaskRun,
    record: CampaignRecord,
    check: Calibration | None,
    say: Callable[[str], None],
    part: CampaignShard | None = None,
) -> Any:
    result = run.result(
        {
            "mode": "campaign-task",
            "agent_command": record.agent_command,
            "agent_network": record.agent_network,
            "agent_repetitions": record.requested,
            "budget_s": record.budget_s,
            "require": record.required,
        }
    )
    result.shard = None if part is None else part.record
    doc = campaign_document(record)
    counts = {"met": 0, "total": 0} if check is None else check.counts()
    archive = write_task_run(
        result,
        run.run_dir,
        extra={"campaign": doc, "calibration": counts},
        prepared=run.prepared,
        started_epoch=run.started,
        say=say,
    )
    keep_calibration(run, check, archive)
    return archive
