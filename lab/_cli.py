"""``python -m lab``: parsing arguments into requests, dispatching them, and printing what
comes back. ``LabError`` is caught here, once, and turned into one sentence and an exit code.

Exit status of ``lab run``: 0 when every scenario executed and every observed verdict and
finding equals its expectation (the instrument is calibrated); 1 when any observation
disagrees; 2 for usage or configuration errors. It is *not* "every backup was correct".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from rich.console import Console

from lab import _start
from lab._parser import build_parser, completion_script
from lab.errors import ArchiveError, LabError
from lab.evaluate.request import EvaluationRequest
from lab.pipeline import RunRequest, execute
from lab.reports.console import (
    print_archive,
    print_campaign,
    print_evaluation,
    print_merge,
    print_summary,
)

if TYPE_CHECKING:
    from lab.campaign.task import CampaignRequest
    from lab.model.evaluation import CandidateKind

__all__ = ["build_parser", "main"]


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    human = _human(args, console)
    request = RunRequest(
        names=list(args.scenarios),
        everything=args.all,
        collector=args.collector,
        packets=args.packets,
        repetitions=args.repetitions,
        size=args.size,
        out=args.out,
        client=args.client,
        timeout_s=args.timeout,
        archive=not args.no_archive,
        scenarios_dir=args.scenario_dir,
        sandbox=args.sandbox,
        shard=args.shard,
        run_id=args.run_id,
        jobs=args.jobs,
    )
    shown: list[bool] = []

    def verdict(result: Any) -> None:  # printed while the PDF is drawn
        print_summary(result, human)
        shown.append(True)

    outcome = execute(request, say=lambda msg: human.print(msg, highlight=False), judged=verdict)
    status = 0 if outcome.result.calibrated else 1
    try:
        _print_run(args, outcome, human, summary=not shown)
    except KeyboardInterrupt:
        # the run finished (and its archive, if any, is whole): not an interrupted run
        human.print(f"The run had finished before the interrupt: {outcome.run_dir}")
    return status


def _print_run(
    args: argparse.Namespace, outcome: Any, human: Console, *, summary: bool = True
) -> None:
    if summary:
        print_summary(outcome.result, human)
    human.print(f"Run directory: {outcome.run_dir}")
    if outcome.archive is not None:
        print_archive(outcome.archive, human)
    if args.json:
        from lab.reports.summary import run_summary

        _emit_json(
            run_summary(outcome.result, run_dir=outcome.run_dir, archive=outcome.archive),
            schema="run-summary",
        )


def _human(args: argparse.Namespace, console: Console) -> Console:
    """Where human text goes: stderr when stdout carries the one JSON document."""
    if not getattr(args, "json", False):
        return console
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)


def _emit_json(document: dict[str, Any], *, schema: str | None = None) -> None:
    """The one JSON document on stdout; ``schema`` names the lab/schemas/ file it must match."""
    if schema is not None:
        from lab.schemas import validate_document

        validate_document(document, schema)
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


def cmd_doctor(args: argparse.Namespace, console: Console) -> int:
    from lab.host import doctor

    human = _human(args, console)
    found = doctor.check(mount=not args.no_mount, sandbox=True)
    human.print(doctor.render_table(found), highlight=False)
    if args.json:
        _emit_json(doctor.to_json(found))
    return 0


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    from lab.evidence import selftest, verify
    from lab.reports.console import print_verification, selftest_table

    human = _human(args, console)
    if args.selftest:
        if args.archive.is_dir():
            raise ArchiveError(
                f"{args.archive}: --selftest tampers with copies of an archive file; give the "
                ".tar.gz, not the directory."
            )
        cases = selftest.selftest(args.archive, args.pubkey)
        human.print(selftest_table(cases, args.archive.name))
        if args.json:
            ok = all(case.ok for case in cases)
            rows = [case.to_dict() for case in cases]
            _emit_json({"archive": args.archive.name, "ok": ok, "cases": rows})
        selftest.require_expected(cases, args.archive.name)
        human.print(f"[green]OK[/]: all {len(cases)} cases behaved as expected.")
        return 0
    try:
        report = verify.verify_archive(args.archive, pubkey=args.pubkey)
    except verify.VerificationError as failure:
        # the whole expected/found table first; main() then says the one sentence (exit 1)
        print_verification(failure.report, human)
        if args.json:
            _emit_json(failure.report.to_dict())
        raise
    print_verification(report, human)
    if args.json:
        _emit_json(report.to_dict())
    return 0


def cmd_merge(args: argparse.Namespace, console: Console) -> int:
    from lab.merge.combine import MergeRequest, merge

    request = MergeRequest(
        archives=list(args.archives),
        pubkey=args.pubkey,
        out=args.out,
        archive=not args.no_archive,
    )
    outcome = merge(request, say=lambda msg: console.print(msg, highlight=False))
    evaluation, campaign = outcome.result.evaluation, outcome.result.campaign
    if evaluation is None and campaign is None:
        print_summary(outcome.result, console)  # what 'lab run' prints
    print_merge(outcome.shards, evaluation, campaign, console)
    console.print(f"Run directory: {outcome.run_dir}")
    if outcome.archive is not None:
        print_archive(outcome.archive, console)
    # the exit status of the unsharded 'lab evaluate' or 'lab campaign'
    if evaluation is not None:
        return 0 if evaluation.status == "pass" else 1
    if campaign is not None:
        return 0 if campaign.succeeded else 1
    return 0 if outcome.result.calibrated else 1


def cmd_keys(args: argparse.Namespace, console: Console) -> int:
    from lab.evidence.keys import generate_keypair

    paths = generate_keypair(args.out, force=args.force)
    console.print(f"Private key: {paths.secret} (mode 0600; keep it out of run directories)")
    console.print(f"Public key:  {paths.public} (signify format) and {paths.public_pem} (PEM)")
    console.print(f"Sign runs with it: export LAB_SIGNING_KEY={paths.secret}")
    return 0


def evaluation_request(args: argparse.Namespace) -> EvaluationRequest:
    """The parsed ``evaluate`` arguments as the one value :func:`judge.execute` takes."""
    kind: CandidateKind = "patch" if args.patch else "source-dir" if args.source_dir else "binary"
    return EvaluationRequest(
        kind=kind,
        path=args.patch or args.source_dir or args.binary,
        repetitions=3 if args.repetitions is None else args.repetitions,
        timing_runs=args.timing_runs,
        timing_max_runs=args.timing_max_runs,
        collector=args.collector,
        packets=args.packets,
        size=args.size,
        timeout_s=args.timeout,
        out=args.out,
        local=args.local,
        json=args.json,
        shard=args.shard,
        run_id=args.run_id,
        jobs=args.jobs,
        recalibrate=args.recalibrate,
    )


def cmd_evaluate(args: argparse.Namespace, console: Console) -> int:
    from lab.evaluate import judge

    human = _human(args, console)
    if args.task is not None or args.tree is not None:
        from lab.workloads.cli import evaluate_task

        return evaluate_task(args, human)
    outcome = judge.execute(
        evaluation_request(args), say=lambda msg: human.print(msg, highlight=False)
    )
    if outcome.evaluation is not None:
        print_evaluation(outcome.evaluation, human)
    if outcome.archive is not None:
        print_archive(outcome.archive, human)
    if args.json and outcome.document is not None:
        # the lab image's own document, from the evaluation that ran there
        _emit_json({**outcome.document, "delegated_to_image": True}, schema="evaluation-summary")
    elif args.json:
        from lab.reports.summary import evaluation_summary

        document = evaluation_summary(
            exit_status=outcome.exit_status,
            evaluation=outcome.evaluation,
            result=outcome.result,
            run_dir=outcome.run_dir,
            archive=outcome.archive,
        )
        _emit_json(document, schema="evaluation-summary")
    return outcome.exit_status


def cmd_completion(args: argparse.Namespace, console: Console) -> int:
    sys.stdout.write(completion_script(args.shell))
    sys.stdout.flush()
    return 0


def _campaign_request(args: argparse.Namespace) -> CampaignRequest:
    from lab.campaign.task import CampaignRequest

    return CampaignRequest(
        task_path=args.task,
        agent_cmd=args.agent_cmd,
        repetitions=args.repetitions,
        budget_s=args.budget,
        require=args.require,
        agent_network=",".join(args.agent_network or ["host"]),
        stop_on_plateau=args.stop_on_plateau,
        escalate_cmd=args.escalate_cmd,
        agent_env=tuple(args.agent_env),
        eval_repetitions=args.eval_repetitions,
        timing_runs=args.timing_runs,
        timing_max_runs=args.timing_max_runs,
        collector=args.collector,
        packets=args.packets,
        size=args.size,
        timeout_s=args.timeout,
        out=args.out,
        local=args.local,
        json=args.json,
        shard=args.shard,
        run_id=args.run_id,
        recalibrate=args.recalibrate,
    )


def cmd_campaign(args: argparse.Namespace, console: Console) -> int:
    from lab.campaign.conduct import execute as conduct
    from lab.model.campaign import campaign_statistics

    request = _campaign_request(args)
    # with --json, stdout holds the one JSON document and everything else goes to stderr
    human = Console(stderr=True, highlight=False, width=console.width) if args.json else console
    stream = sys.stderr if args.json else sys.stdout
    from lab.workloads.task import is_fixture_task

    if request.task_path.is_file() and is_fixture_task(request.task_path):
        from lab.workloads.campaign import execute as conduct  # a campaigns/*/task.yaml
    outcome = conduct(
        request,
        say=lambda msg: human.print(msg, highlight=False, markup=False),
        echo=lambda line: print(line, file=stream, flush=True),
    )
    if outcome.campaign is not None:
        print_campaign(outcome.campaign, human)
    if outcome.archive is not None:
        print_archive(outcome.archive, human)
    if args.json and outcome.document is not None:
        # the lab image's own document, from the campaign that ran there
        _emit_json({**outcome.document, "delegated_to_image": True}, schema="campaign-summary")
    elif args.json:
        document = {
            "delegated_to_image": outcome.campaign is None,
            "repetitions": [r.row() for r in outcome.campaign.repetitions]
            if outcome.campaign
            else [],
            "met": None if outcome.campaign is None else outcome.campaign.met,
            "required": None if outcome.campaign is None else outcome.campaign.required,
            "archive": None if outcome.archive is None else str(outcome.archive.path),
            "archive_sha256": None if outcome.archive is None else outcome.archive.sha256,
            "exit_status": outcome.exit_status,
            **campaign_statistics(outcome.campaign),
        }
        _emit_json(document, schema="campaign-summary")
    return outcome.exit_status


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Wide enough for the verdict table when the output is a file or a CI log.
    width = None if sys.stdout.isatty() else 120
    console = Console(stderr=False, highlight=False, width=width)
    err = Console(stderr=True, highlight=False, width=width)
    handlers = {
        "run": cmd_run,
        "doctor": cmd_doctor,
        "verify": cmd_verify,
        "keys": cmd_keys,
        "merge": cmd_merge,
        "evaluate": cmd_evaluate,
        "campaign": cmd_campaign,
        "completion": cmd_completion,
    }
    from lab.run.interrupt import terminate_as_interrupt

    try:
        # SIGTERM (docker stop, timeout, Kubernetes) is handled like Ctrl-C: the run stops
        # every process it started and is marked incomplete (lab.run.interrupt)
        with terminate_as_interrupt():
            return handlers[args.command](args, console)
    except LabError as exc:
        err.print(f"[bold red]error:[/] {exc.diagnostics()}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("[bold red]interrupted[/]: every process the lab started was stopped.")
        return 130


def run() -> None:
    """The ``lab`` program (``python -m lab`` and the console script): ``main``, then the
    process ends at once. Every file the lab writes is closed, and every process it started
    stopped, before ``main`` returns; what is left is the interpreter freeing its modules
    and objects one by one, 60 ms after a default run on the lab's machine, on the way from
    the evidence to the prompt. A thread still running (none should be) gets the normal
    exit, which waits for it."""
    status = main()
    _start.stop_unused()  # a drawer started for a command that never drew
    if any(
        t.is_alive() and not t.daemon
        for t in threading.enumerate()
        if t is not threading.main_thread()
    ):
        sys.exit(status)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
