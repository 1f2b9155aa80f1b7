"""The command line's grammar: every subcommand and option of ``python -m lab``, each with
its help text, ``prog`` taken from the name the lab was invoked by, and the shell completion
script (shtab) generated from this same parser.

    parser = build_parser()                    # prog: "python -m lab" or the script's name
    args = parser.parse_args(["run", "baseline", "--json"])
    print(completion_script("bash"))           # python -m lab completion bash
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lab import __version__
from lab._parser_types import add_shard, complete_path, positive_count, prog_name, size_value
from lab.evaluate.request import DEFAULT_TIMEOUT_S
from lab.pipeline import COLLECTOR_CHOICES, PACKET_CHOICES, SANDBOX_CHOICES
from lab.workloads.backup.fixture import DEFAULT_SIZE

#: the shells ``lab completion`` writes a script for (shtab supports them all)
COMPLETION_SHELLS = ("bash", "zsh", "tcsh")
#: the command a completion script completes: the console script ``pip install`` puts on
#: PATH (a shell completes one word, never "python -m lab")
COMPLETION_COMMAND = "lab"


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="run scenarios and write a signed evidence archive")
    run.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help="scenario names (scenarios/NAME.yaml); or --all",
    )
    run.add_argument("--all", action="store_true", help="run every scenario in scenarios/")
    run.add_argument(
        "--collector",
        choices=COLLECTOR_CHOICES,
        default="none",
        help="the process observer of the extra pass beside the untraced one (default none; "
        "all: every one available here)",
    )
    run.add_argument(
        "--packets",
        choices=PACKET_CHOICES,
        default="off",
        help="tcpdump beside every pass: off (default), best-effort (recorded as not observed "
        "when tcpdump cannot run), required (refuse to start without it)",
    )
    run.add_argument(
        "--repetitions",
        type=positive_count,
        default=1,
        help="repetitions of every scenario (default 1: capability; 3 or more: reliability k/N)",
    )
    run.add_argument(
        "--size", type=size_value, default=DEFAULT_SIZE, help="source size (default 512K)"
    )
    complete_path(
        run.add_argument(
            "--out",
            type=Path,
            default=Path("artifacts"),
            help="where the run directory and its archive go (default artifacts/)",
        ),
        directory=True,
    )
    complete_path(
        run.add_argument(
            "--client", type=Path, default=None, help="client binary (default native/)"
        )
    )
    run.add_argument(
        "--timeout", type=float, default=120.0, help="per-invocation limit, s (default 120)"
    )
    run.add_argument("--no-archive", action="store_true", help="skip signing and packing")
    complete_path(
        run.add_argument(
            "--scenario-dir",
            type=Path,
            default=None,
            help="directory of scenario files (scenarios/)",
        ),
        directory=True,
    )
    run.add_argument(
        "--sandbox",
        choices=SANDBOX_CHOICES,
        default="required",
        help="required (default): every client invocation runs in the sandbox, and the run "
        "refuses to start without it; off: the client runs as this user, uncontained, and the "
        "clauses it could forge (C1, C3, C5, C6) cannot pass",
    )
    add_jobs(run)
    add_shard(run, "scenario × repetition")
    run.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (the verdict summary: run id, what the exit "
        "status means, calibration counts, per-scenario reliability, the "
        "archive, its SHA-256 and the signing key id); the human text on stderr",
    )


def add_jobs(parser: argparse.ArgumentParser) -> None:
    """``--jobs N``: passes of one phase at once (``lab.run.schedule``)."""
    parser.add_argument(
        "--jobs",
        type=positive_count,
        default=None,
        metavar="N",
        help="run up to N passes of different scenario repetitions at once, within each phase "
        "(every untraced pass, then every strace pass, ...; default: the number of cores plus "
        "one; 1: one pass at a time); each runs as a client user of its own, timing rounds "
        "always run alone, and the report says which passes overlapped",
    )


def _add_evaluate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = sub.add_parser("evaluate", help="judge a candidate client against the contract")
    what = ev.add_mutually_exclusive_group(required=True)
    complete_path(
        what.add_argument(
            "--patch",
            type=Path,
            help="a patch to the client in native/ (applied with patch -p1 to a copy)",
        )
    )
    complete_path(
        what.add_argument(
            "--source-dir", type=Path, help="a client source tree whose Makefile builds it"
        ),
        directory=True,
    )
    complete_path(what.add_argument("--binary", type=Path, help="a prebuilt client executable"))
    complete_path(
        what.add_argument(
            "--tree",
            type=Path,
            help="with --task: the candidate's copy of the task's fixture (a directory)",
        ),
        directory=True,
    )
    complete_path(
        ev.add_argument(
            "--task",
            type=Path,
            default=None,
            help="judge a candidate of this fixture task (campaigns/*/task.yaml; "
            "with --tree or --patch); its contract is calibrated first",
        )
    )
    ev.add_argument(
        "--repetitions",
        type=positive_count,
        default=None,
        help="repetitions of every contract condition (default 3; with --task: the task's)",
    )
    ev.add_argument(
        "--timing-runs",
        type=positive_count,
        default=12,
        help="untraced timing rounds, candidate and baseline alternated: at least this many "
        "(default 12)",
    )
    ev.add_argument(
        "--timing-max-runs",
        type=positive_count,
        default=None,
        help="and at most this many, added 4 at a time until the ratio's 95 %% interval is "
        "within ±5 %% (default 5 × --timing-runs; equal to it: exactly that many)",
    )
    ev.add_argument(
        "--collector",
        choices=COLLECTOR_CHOICES,
        default="all",
        help="the process observers of the judged passes (default all: every one available)",
    )
    ev.add_argument(
        "--packets",
        choices=PACKET_CHOICES,
        default="best-effort",
        help="tcpdump beside every pass (default best-effort)",
    )
    ev.add_argument(
        "--size", type=size_value, default=DEFAULT_SIZE, help="source size (default 512K)"
    )
    ev.add_argument("--local", action="store_true", help="build on the host, not in the image")
    complete_path(
        ev.add_argument(
            "--out",
            type=Path,
            default=Path("artifacts"),
            help="where the run directory and its archive go (default artifacts/)",
        ),
        directory=True,
    )
    ev.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"per-invocation limit, s (default {DEFAULT_TIMEOUT_S:g})",
    )
    add_jobs(ev)
    ev.add_argument("--skip-calibration", action="store_true", help=argparse.SUPPRESS)
    ev.add_argument(
        "--recalibrate",
        action="store_true",
        help="check again even when a check kept in an archive under --out matches every "
        "input: with --task, judge the task's seeded patches; else run the instrument check "
        "(the seeded false-success and unexpected-egress)",
    )
    add_shard(ev, "condition × repetition")
    ev.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (the candidate's status, k/N per clause, the "
        "timing ratio, the archive, its SHA-256 and the signing key id); the human text on "
        "stderr",
    )


def _add_verify(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = sub.add_parser(
        "verify", help="verify an evidence archive, or an unpacked run directory in place"
    )
    complete_path(
        verify.add_argument(
            "archive",
            type=Path,
            metavar="ARCHIVE|DIR",
            help="a run's .tar.gz, or the directory it unpacks to (no symbolic link is followed)",
        )
    )
    complete_path(
        verify.add_argument(
            "--pubkey",
            type=Path,
            default=None,
            help="the signer's public key you trust (signify lab.pub or PEM); without it, the "
            "embedded lab.pub proves integrity only",
        )
    )
    verify.add_argument("--selftest", action="store_true", help="show tampering being caught")
    verify.add_argument(
        "--json",
        action="store_true",
        help="one JSON document on stdout (its 'ok' is the verdict); the table on stderr",
    )


def _add_doctor(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = sub.add_parser("doctor", help="which observers work on this machine, and why not")
    doctor.add_argument(
        "--json", action="store_true", help="one JSON document on stdout; the table on stderr"
    )
    doctor.add_argument("--no-mount", action="store_true", help="do not mount tracefs/debugfs")


def _add_merge_keys(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = sub.add_parser(
        "merge",
        help="verify the shard archives of one run (or evaluation) and merge them into one "
        "signed run",
    )
    complete_path(
        merge.add_argument(
            "archives",
            nargs="+",
            type=Path,
            metavar="SHARD.tar.gz",
            help="every shard archive of the run or evaluation (lab run/evaluate --shard I/N)",
        )
    )
    complete_path(
        merge.add_argument(
            "--pubkey",
            type=Path,
            required=True,
            help="the public key every shard must be signed with",
        )
    )
    complete_path(
        merge.add_argument(
            "--out",
            type=Path,
            default=Path("artifacts"),
            help="where the merged run directory and its archive go (default artifacts/)",
        ),
        directory=True,
    )
    merge.add_argument("--no-archive", action="store_true", help="skip signing and packing")

    keys = sub.add_parser("keys", help="signing keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    gen = keys_sub.add_parser("generate", help="generate an Ed25519 signing key pair")
    complete_path(
        gen.add_argument(
            "--out",
            type=Path,
            required=True,
            help="directory for lab.sec (mode 0600), lab.pub and lab.pub.pem",
        ),
        directory=True,
    )
    gen.add_argument("--force", action="store_true", help="overwrite existing key files")


def _add_campaign(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cp = sub.add_parser(
        "campaign", help="run a coding agent N times on a task and judge every result"
    )
    complete_path(
        cp.add_argument("--task", type=Path, required=True, help="the task file (campaigns/*.yaml)")
    )
    cp.add_argument("--agent-cmd", required=True, help="the agent's command (run with sh -c)")
    cp.add_argument(
        "--repetitions", type=positive_count, default=None, help="agent runs (default: the task's)"
    )
    cp.add_argument(
        "--budget", type=float, default=None, help="seconds per agent run (default: the task's)"
    )
    cp.add_argument(
        "--require",
        type=positive_count,
        default=None,
        help="exit 0 when at least K runs met the task (default: every run)",
    )
    cp.add_argument("--agent-network", action="append", default=None, help="the agent's "
                    "network: host (default), none, or model=HOST:PORT (repeatable; witnessed: "
                    "its only way out is a forwarder to each, clause A1 egress)")  # fmt: skip
    cp.add_argument("--stop-on-plateau", type=positive_count, default=None, metavar="K", help="end "
                    "a repetition after K judged snapshots in a row with no new pass")  # fmt: skip
    cp.add_argument("--escalate-cmd", default=None, metavar="CMD2", help="hand each run that "
                    "failed, timed out or plateaued to this second agent, in a fresh workspace, "
                    "with the lab's signed evidence package of it ($LAB_ESCALATION)")  # fmt: skip
    cp.add_argument(
        "--agent-env",
        action="append",
        default=[],
        metavar="NAME",
        help="hand this environment variable to the agent (repeatable; recorded by name)",
    )
    cp.add_argument(
        "--eval-repetitions",
        type=positive_count,
        default=None,
        help="repetitions of every contract condition per judged result (default: the task's)",
    )
    cp.add_argument(
        "--timing-runs",
        type=positive_count,
        default=None,
        help="untraced timing rounds per judged result, at least (default: the task's)",
    )
    cp.add_argument(
        "--timing-max-runs",
        type=positive_count,
        default=None,
        help="and at most, until the speed goal's 95 %% interval is within ±5 %% "
        "(default: the task's, else 5 × the least)",
    )
    cp.add_argument(
        "--collector",
        choices=COLLECTOR_CHOICES,
        default=None,
        help="the process observers of the judged passes (default: the task's)",
    )
    cp.add_argument(
        "--packets",
        choices=PACKET_CHOICES,
        default=None,
        help="tcpdump beside every judged pass (default: the task's)",
    )
    cp.add_argument(
        "--size", type=size_value, default=None, help="source size (default: the task's)"
    )
    cp.add_argument(
        "--timeout", type=float, default=None, help="per-invocation limit, s (default: the task's)"
    )
    cp.add_argument("--local", action="store_true", help="run on the host, not in the image")
    cp.add_argument(
        "--recalibrate",
        action="store_true",
        help="a fixture task's seeded patches judged again even when a calibration kept in "
        "an archive under --out matches every input",
    )
    add_shard(cp, "agent run (campaign repetition)")
    cp.add_argument(
        "--json",
        action="store_true",
        help="one JSON document on stdout (every run's outcome, k met, the archive); text on "
        "stderr",
    )
    complete_path(
        cp.add_argument(
            "--out",
            type=Path,
            default=Path("artifacts"),
            help="where the campaign directory and its archive go (default artifacts/)",
        ),
        directory=True,
    )


def _add_completion(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    completion = sub.add_parser(
        "completion",
        help=f"print a shell completion script for the '{COMPLETION_COMMAND}' command",
        description=f"Print a completion script for the '{COMPLETION_COMMAND}' console script "
        f'(pip install puts it on PATH), e.g. eval "$(python -m lab completion bash)".',
    )
    completion.add_argument("shell", choices=COMPLETION_SHELLS, help="the shell to complete in")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog_name() if prog is None else prog,
        description="Execution Evidence Lab: observe a backup client from outside its own "
        "logging and judge it against an explicit contract.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"lab {__version__}",
        help="print the lab's version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(sub)
    _add_doctor(sub)
    _add_verify(sub)
    _add_merge_keys(sub)
    _add_evaluate(sub)
    _add_campaign(sub)
    _add_completion(sub)
    return parser


def completion_script(shell: str) -> str:
    """The completion script for ``shell``, generated by shtab from :func:`build_parser`."""
    import shtab  # only this command needs it

    return str(shtab.complete(build_parser(prog=COMPLETION_COMMAND), shell=shell))
