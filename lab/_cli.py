"""``python -m lab``: parsing arguments into requests, dispatching them, and printing what
comes back. ``LabError`` is caught here, once, and turned into one sentence and an exit code.

Exit status of ``lab run``: 0 when every scenario executed and every observed verdict and
finding equals its expectation (the instrument is calibrated); 1 when any observation
disagrees; 2 for usage or configuration errors. It is *not* "every backup was correct".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from lab._parser import build_parser, completion_script
from lab.errors import ArchiveError, LabError
from lab.evaluate.request import EvaluationRequest
from lab.model.evaluation import CandidateKind, Evaluation
from lab.pipeline import RunRequest, execute

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
    outcome = execute(request, say=lambda msg: human.print(msg, highlight=False))
    status = 0 if outcome.result.calibrated else 1
    try:
        _print_run(args, outcome, human)
    except KeyboardInterrupt:
        # the run finished (and its archive, if any, is whole): not an interrupted run
        human.print(f"The run had finished before the interrupt: {outcome.run_dir}")
    return status


def _print_run(args: argparse.Namespace, outcome: Any, human: Console) -> None:
    from lab.reports.console import print_summary

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


def print_archive(info: object, console: Console) -> None:
    from lab.evidence.archive import ArchiveInfo

    assert isinstance(info, ArchiveInfo)
    rel = _rel(info.path)
    console.print(f"Archive: {rel}")
    console.print(f"SHA-256: {info.sha256}")
    console.print(
        f"Signed by key {info.key_id} (the key id minisign -V and lab verify print; public key "
        "in lab.pub, and lab.pub.pem for openssl)",
        highlight=False,
        soft_wrap=True,
    )
    if info.ephemeral:
        console.print(
            "[yellow]Signed with an ephemeral key: integrity only, authenticity is not "
            "established. Set LAB_SIGNING_KEY to sign with your key.[/]"
        )
    run_dir = _rel(info.run_dir)
    pubkey = "" if info.ephemeral else " --pubkey YOUR-lab.pub"
    console.print("Verify it with the lab:", highlight=False)
    console.print(f"  python -m lab verify {rel}{pubkey}", highlight=False, soft_wrap=True)
    console.print("Or with standard tools, in the unpacked run directory:", highlight=False)
    for line in (
        f"cd {run_dir}",
        "signify-openbsd -C -p lab.pub -x SHA256SUMS.signify   # signed list + every file",
        "signify-openbsd -V -p lab.pub -m SHA256SUMS           # or: the list's signature,",
        "minisign -V -p lab.pub -m SHA256SUMS -x SHA256SUMS.sig  # (the same, with minisign)",
        "sha256sum -c SHA256SUMS          # then every file (GNU coreutils, shasum -c)",
        "sha256sum -c SHA256SUMS.gnu      # the same with busybox: GNU lines, listed in SHA256SUMS",
    ):
        console.print(f"  {line}", highlight=False, soft_wrap=True)
    console.print(
        "  (compare lab.pub with the key you trust: the embedded key alone proves integrity, "
        "not authenticity)",
        highlight=False,
    )
    console.print("Check the archive file itself, from its directory:", highlight=False)
    console.print(
        f"  cd {_rel(info.path.parent)} && sha256sum -c {info.checksum_file.name}",
        highlight=False,
        soft_wrap=True,
    )


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path, Path.cwd())
    except ValueError:
        return str(path)


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
    from lab.reports.console import print_summary

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
    for shard in outcome.shards:
        console.print(
            f"shard {shard['index']}/{shard['count']}: {shard['archive']} "
            f"sha256 {shard['sha256']} ({len(shard['units'])} units)",
            highlight=False,
        )
    if evaluation is not None:
        print_evaluation(evaluation, console)
    if campaign is not None:
        from lab.reports.campaign import campaign_lines

        for line in campaign_lines(campaign):
            console.print(line, highlight=False, markup=False)
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
        repetitions=args.repetitions,
        timing_runs=args.timing_runs,
        collector=args.collector,
        packets=args.packets,
        size=args.size,
        timeout_s=args.timeout,
        out=args.out,
        local=args.local,
        json=args.json,
        shard=args.shard,
        run_id=args.run_id,
    )


def cmd_evaluate(args: argparse.Namespace, console: Console) -> int:
    from lab.evaluate import judge

    human = _human(args, console)
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


def print_evaluation(evaluation: Evaluation, console: Console) -> None:
    """The candidate's verified result: status, k/N per clause, the untraced timing ratio."""
    console.print(
        f"Evaluation {evaluation.evaluation_id}: [bold]{evaluation.status}[/]"
        + (f" — {evaluation.status_reason}" if evaluation.status_reason else "")
    )
    for clause, row in (evaluation.clauses or {}).items():
        console.print(
            f"  {clause}: {row.passed}/{row.exercised} passed where exercised"
            f" ({row.failed} fail, {row.not_observed} not observed,"
            f" {row.not_exercised} of {row.total} not exercised)"
        )
    if evaluation.timing_skipped:
        console.print(f"  timing: {evaluation.timing_skipped}")
    ratio = evaluation.timing.ratio if evaluation.timing is not None else None
    if ratio:
        fb = ratio.get("first_backup_wall")
        console.print(
            f"  timing (untraced, median wall, first backup): candidate/baseline = "
            f"{'N/A' if fb is None else f'{fb:.2f}×'}"
        )
    share = evaluation.timing.floor_share("first_backup_wall") if evaluation.timing else None
    if share is not None:
        console.print(
            f"  instrument floor (a reference uploader timed the same way): {100.0 * share:.0f}%"
            " of the baseline's first-backup wall"
        )


def cmd_campaign(args: argparse.Namespace, console: Console) -> int:
    from lab.campaign.conduct import execute as conduct
    from lab.campaign.task import CampaignRequest
    from lab.model.campaign import campaign_statistics

    request = CampaignRequest(
        task_path=args.task,
        agent_cmd=args.agent_cmd,
        repetitions=args.repetitions,
        budget_s=args.budget,
        require=args.require,
        agent_network=",".join(args.agent_network or ["host"]),
        stop_on_plateau=args.stop_on_plateau,
        agent_env=tuple(args.agent_env),
        eval_repetitions=args.eval_repetitions,
        timing_runs=args.timing_runs,
        collector=args.collector,
        packets=args.packets,
        size=args.size,
        timeout_s=args.timeout,
        out=args.out,
        local=args.local,
        json=args.json,
        shard=args.shard,
        run_id=args.run_id,
    )
    # with --json, stdout holds the one JSON document and everything else goes to stderr
    human = Console(stderr=True, highlight=False, width=console.width) if args.json else console
    stream = sys.stderr if args.json else sys.stdout
    outcome = conduct(
        request,
        say=lambda msg: human.print(msg, highlight=False, markup=False),
        echo=lambda line: print(line, file=stream, flush=True),
    )
    if outcome.campaign is not None:
        from lab.reports.campaign import campaign_lines

        for line in campaign_lines(outcome.campaign):
            human.print(line, highlight=False, markup=False)
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


if __name__ == "__main__":
    sys.exit(main())
