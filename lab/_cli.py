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

from rich.console import Console

from lab import __version__
from lab.errors import LabError
from lab.evaluate.model import Evaluation
from lab.evaluate.request import CandidateKind, EvaluationRequest
from lab.run.orchestrate import (
    COLLECTOR_CHOICES,
    PACKET_CHOICES,
    SANDBOX_CHOICES,
    RunRequest,
    execute,
)
from lab.run.shard import ShardSpec


def _size(text: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    mult = units.get(t[-1:], 1)
    if t[-1:] in units:
        t = t[:-1]
    try:
        value = int(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size (e.g. 524288, 512K, 8M)"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError("size must be at least 1 byte")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _shard(text: str) -> ShardSpec:
    try:
        return ShardSpec.parse(text)
    except LabError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lab",
        description="Execution Evidence Lab: observe a backup client from outside its own "
        "logging and judge it against an explicit contract.",
    )
    parser.add_argument("--version", action="version", version=f"lab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run scenarios and write a signed evidence archive")
    run.add_argument("scenarios", nargs="*", metavar="SCENARIO")
    run.add_argument("--all", action="store_true", help="run every scenario in scenarios/")
    run.add_argument("--collector", choices=COLLECTOR_CHOICES, default="none")
    run.add_argument("--packets", choices=PACKET_CHOICES, default="off")
    run.add_argument("--repetitions", type=_positive, default=1)
    run.add_argument("--size", type=_size, default=524_288, help="source size (default 512K)")
    run.add_argument("--out", type=Path, default=Path("artifacts"))
    run.add_argument("--client", type=Path, default=None, help="client binary (default native/)")
    run.add_argument("--timeout", type=float, default=120.0, help="per-invocation limit, s")
    run.add_argument("--no-archive", action="store_true", help="skip signing and packing")
    run.add_argument(
        "--scenario-dir", type=Path, default=None, help="directory of scenario files (scenarios/)"
    )
    run.add_argument(
        "--sandbox",
        choices=SANDBOX_CHOICES,
        default="required",
        help="required (default): every client invocation runs in the sandbox, and the run "
        "refuses to start without it; off: the client runs as this user, uncontained, and the "
        "clauses it could forge (C1, C3, C5, C6) cannot pass",
    )
    run.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="I/N",
        help="run only shard I of N of the scenario × repetition units (merge the N signed "
        "archives with 'lab merge')",
    )
    run.add_argument(
        "--run-id",
        default=None,
        help="the run id (with --shard: the id every shard shares; default: derived from the "
        "inputs, the same on every machine)",
    )

    doctor = sub.add_parser("doctor", help="which observers work on this machine, and why not")
    doctor.add_argument("--json", action="store_true")
    doctor.add_argument("--no-mount", action="store_true", help="do not mount tracefs/debugfs")

    verify = sub.add_parser("verify", help="verify an evidence archive")
    verify.add_argument("archive", type=Path)
    verify.add_argument("--pubkey", type=Path, default=None)
    verify.add_argument("--selftest", action="store_true", help="show tampering being caught")

    merge = sub.add_parser(
        "merge", help="verify the shard archives of one run and merge them into one signed run"
    )
    merge.add_argument("archives", nargs="+", type=Path, metavar="SHARD.tar.gz")
    merge.add_argument(
        "--pubkey", type=Path, required=True, help="the public key every shard must be signed with"
    )
    merge.add_argument("--out", type=Path, default=Path("artifacts"))
    merge.add_argument("--no-archive", action="store_true", help="skip signing and packing")

    keys = sub.add_parser("keys", help="signing keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    gen = keys_sub.add_parser("generate", help="generate an Ed25519 signing key pair")
    gen.add_argument("--out", type=Path, required=True)
    gen.add_argument("--force", action="store_true", help="overwrite existing key files")

    ev = sub.add_parser("evaluate", help="judge a candidate client against the contract")
    what = ev.add_mutually_exclusive_group(required=True)
    what.add_argument("--patch", type=Path)
    what.add_argument("--source-dir", type=Path)
    what.add_argument("--binary", type=Path)
    ev.add_argument("--repetitions", type=_positive, default=3)
    ev.add_argument("--timing-runs", type=_positive, default=20)
    ev.add_argument("--collector", choices=COLLECTOR_CHOICES, default="all")
    ev.add_argument("--packets", choices=PACKET_CHOICES, default="best-effort")
    ev.add_argument("--size", type=_size, default=524_288)
    ev.add_argument("--local", action="store_true", help="build on the host, not in the image")
    ev.add_argument("--out", type=Path, default=Path("artifacts"))
    ev.add_argument("--timeout", type=float, default=30.0, help="per-invocation limit, s")
    ev.add_argument("--skip-calibration", action="store_true", help=argparse.SUPPRESS)

    cp = sub.add_parser(
        "campaign", help="run a coding agent N times on a task and judge every result"
    )
    cp.add_argument("--task", type=Path, required=True, help="the task file (campaigns/*.yaml)")
    cp.add_argument("--agent-cmd", required=True, help="the agent's command (run with sh -c)")
    cp.add_argument("--repetitions", type=_positive, default=None, help="default: the task's")
    cp.add_argument("--budget", type=float, default=None, help="seconds per agent run")
    cp.add_argument("--require", type=_positive, default=None, help="K met (default: all)")
    cp.add_argument("--agent-network", choices=("host", "none"), default="host")
    cp.add_argument(
        "--agent-env",
        action="append",
        default=[],
        metavar="NAME",
        help="hand this environment variable to the agent (repeatable; recorded by name)",
    )
    cp.add_argument("--eval-repetitions", type=_positive, default=None)
    cp.add_argument("--timing-runs", type=_positive, default=None)
    cp.add_argument("--collector", choices=COLLECTOR_CHOICES, default=None)
    cp.add_argument("--packets", choices=PACKET_CHOICES, default=None)
    cp.add_argument("--size", type=_size, default=None)
    cp.add_argument("--timeout", type=float, default=None, help="per-invocation limit, s")
    cp.add_argument("--local", action="store_true", help="run on the host, not in the image")
    cp.add_argument("--json", action="store_true", help="one JSON document on stdout")
    cp.add_argument("--out", type=Path, default=Path("artifacts"))
    return parser


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from lab.reports.console import print_summary

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
    )
    outcome = execute(request, say=lambda msg: console.print(msg, highlight=False))
    print_summary(outcome.result, console)
    console.print(f"Run directory: {outcome.run_dir}")
    if outcome.archive is not None:
        print_archive(outcome.archive, console)
    return 0 if outcome.result.calibrated else 1


def print_archive(info: object, console: Console) -> None:
    from lab.evidence.archive import ArchiveInfo

    assert isinstance(info, ArchiveInfo)
    rel = _rel(info.path)
    console.print(f"Archive: {rel}")
    console.print(f"SHA-256: {info.sha256}")
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
        "sha256sum -c SHA256SUMS",
        "signify-openbsd -V -p lab.pub -m SHA256SUMS",
        "minisign -V -p lab.pub -m SHA256SUMS -x SHA256SUMS.sig",
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


def cmd_doctor(args: argparse.Namespace, console: Console) -> int:
    from lab.host import doctor

    found = doctor.check(mount=not args.no_mount, sandbox=True)
    if args.json:
        print(json.dumps(doctor.to_json(found), indent=2, sort_keys=True))
    else:
        console.print(doctor.render_table(found), highlight=False)
    return 0


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    from lab.evidence import selftest, verify
    from lab.reports.console import print_verification, selftest_table

    if args.selftest:
        cases = selftest.selftest(args.archive, args.pubkey)
        console.print(selftest_table(cases, args.archive.name))
        selftest.require_expected(cases, args.archive.name)
        console.print(f"[green]OK[/]: all {len(cases)} cases behaved as expected.")
        return 0
    try:
        report = verify.verify_archive(args.archive, pubkey=args.pubkey)
    except verify.VerificationError as failure:
        # the whole expected/found table first; main() then says the one sentence (exit 1)
        print_verification(failure.report, console)
        raise
    print_verification(report, console)
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
    print_summary(outcome.result, console)
    for shard in outcome.shards:
        console.print(
            f"shard {shard['index']}/{shard['count']}: {shard['archive']} "
            f"sha256 {shard['sha256']} ({len(shard['units'])} units)",
            highlight=False,
        )
    console.print(f"Run directory: {outcome.run_dir}")
    if outcome.archive is not None:
        print_archive(outcome.archive, console)
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
    )


def cmd_evaluate(args: argparse.Namespace, console: Console) -> int:
    from lab.evaluate import judge

    outcome = judge.execute(
        evaluation_request(args), say=lambda msg: console.print(msg, highlight=False)
    )
    if outcome.evaluation is not None:
        print_evaluation(outcome.evaluation, console)
    if outcome.archive is not None:
        print_archive(outcome.archive, console)
    return outcome.exit_status


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


def cmd_campaign(args: argparse.Namespace, console: Console) -> int:
    from lab.campaign.conduct import execute
    from lab.campaign.task import CampaignRequest

    request = CampaignRequest(
        task_path=args.task,
        agent_cmd=args.agent_cmd,
        repetitions=args.repetitions,
        budget_s=args.budget,
        require=args.require,
        agent_network=args.agent_network,
        agent_env=tuple(args.agent_env),
        eval_repetitions=args.eval_repetitions,
        timing_runs=args.timing_runs,
        collector=args.collector,
        packets=args.packets,
        size=args.size,
        timeout_s=args.timeout,
        out=args.out,
        local=args.local,
    )
    # with --json, stdout holds the one JSON document and everything else goes to stderr
    human = Console(stderr=True, highlight=False, width=console.width) if args.json else console
    stream = sys.stderr if args.json else sys.stdout
    outcome = execute(
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
    if args.json:
        document = {
            "repetitions": [r.row() for r in outcome.campaign.repetitions]
            if outcome.campaign
            else [],
            "met": None if outcome.campaign is None else outcome.campaign.met,
            "required": None if outcome.campaign is None else outcome.campaign.required,
            "archive": None if outcome.archive is None else str(outcome.archive.path),
            "archive_sha256": None if outcome.archive is None else outcome.archive.sha256,
            "exit_status": outcome.exit_status,
        }
        print(json.dumps(document, indent=2, sort_keys=True))
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
    }
    try:
        return handlers[args.command](args, console)
    except LabError as exc:
        err.print(f"[bold red]error:[/] {exc.diagnostics()}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("[bold red]interrupted[/]: every process the lab started was stopped.")
        return 130


if __name__ == "__main__":
    sys.exit(main())
