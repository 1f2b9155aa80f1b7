"""Console presenter: the verdict table and the calibration matrix of a run, and the
verification table of an archive, drawn with rich.

    print_summary(run, console)               # python -m lab run
    print_verification(report, console)       # python -m lab verify: every check, warnings
    console.print(selftest_table(cases, "r1.tar.gz"))

It draws ``RunResult``, ``VerifyReport`` and self-test cases; it computes nothing they lack.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from lab.model import CLAUSES, OBSERVERS, RunResult, Verdict
from lab.reports.run import concurrency_statement, sessions_statement
from lab.reports.table import sentence
from lab.reports.text import console_text as _t

if TYPE_CHECKING:
    from lab.evidence.archive import ArchiveInfo
    from lab.evidence.checks import VerifyReport
    from lab.evidence.selftest import SelftestCase
    from lab.model.campaign import CampaignRecord
    from lab.model.evaluation import Evaluation

_STYLE = {"pass": "green", "fail": "red", "not-observed": "yellow", "not-exercised": "cyan"}


def _cell(v: Verdict | None) -> str:
    if v is None:
        return "-"
    style = _STYLE[v.observed]
    text = f"[{style}]{v.observed}[/]"
    if v.agrees is False:
        text += f" [bold red](expected {_t(str(v.expected))})[/]"
    return text


def verdict_table(run: RunResult) -> Table:
    table = Table(title="Verdicts (observed; expected shown only where they differ)")
    table.add_column("scenario")
    table.add_column("rep", justify="right")
    for clause in CLAUSES:
        table.add_column(clause)
    table.add_column("calibration", justify="right")
    for s in run.scenarios:
        cal = s.calibration
        cells = [_cell(s.verdicts.get(c)) for c in CLAUSES]
        score = f"{cal.met}/{cal.total}"
        if cal.not_met:
            score = f"[bold red]{score}[/]"
        if cal.not_observed:
            score += f" ({cal.not_observed} n/o)"
        table.add_row(_t(s.name), str(s.repetition), *cells, score)
    return table


def findings_table(run: RunResult) -> Table:
    """Every expectation whose observation disagreed with it."""
    table = Table(title="Calibration findings NOT met")
    for col in ("scenario", "observer", "inv", "key", "expected", "observed", "why"):
        table.add_column(col, overflow="fold")
    for s in run.scenarios:
        for f in s.findings:
            if f.met is not False:
                continue
            status = "[red]NOT MET[/]"
            table.add_row(
                _t(s.name),
                _t(f.observer),
                "all" if f.invocation is None else str(f.invocation),
                _t(f.key),
                _t(str(f.expected)),
                status if f.observed is None else f"{_t(str(f.observed))} {status}",
                _t(f.reason or ""),
            )
    return table


def observer_matrix(run: RunResult) -> Table:
    """Calibration matrix: for every scenario and every observer, expectations met/total
    (n/o = not observed: the observer did not run, never counted as zero)."""
    observers = [
        o for o in OBSERVERS if any(f.observer == o for s in run.scenarios for f in s.findings)
    ]
    table = Table(title="Calibration matrix: expectations met per scenario and observer")
    table.add_column("scenario")
    table.add_column("rep", justify="right")
    for o in observers:
        table.add_column(o, justify="center")
    for s in run.scenarios:
        cells = []
        for o in observers:
            rows = [f for f in s.findings if f.observer == o]
            if not rows:
                cells.append("[dim]-[/]")
                continue
            met = sum(1 for f in rows if f.met is True)
            unseen = sum(1 for f in rows if f.met is None)
            style = "red" if any(f.met is False for f in rows) else "green"
            text = f"[{style}]{met}/{len(rows)}[/]"
            if unseen:
                text = f"[yellow]{met}/{len(rows)} ({unseen} n/o)[/]"
            cells.append(text)
        table.add_row(_t(s.name), str(s.repetition), *cells)
    return table


def repetition_lines(run: RunResult) -> list[str]:
    lines = []
    for row in run.aggregate:
        cal = row.calibration
        lines.append(
            f"{_t(row.scenario)}: observations matched the expectations in "
            f"{cal.no_disagreement_repetitions} of {cal.total} repetition(s) — {_t(row.wording)}"
        )
    return lines


def print_summary(run: RunResult, console: Console) -> None:
    console.print(verdict_table(run))
    console.print(observer_matrix(run))
    if any(f.met is False for s in run.scenarios for f in s.findings):
        console.print(findings_table(run))
    unseen: dict[str, int] = {}
    for s in run.scenarios:
        for f in s.findings:
            if f.met is None:
                key = f"{f.observer}: {f.reason}"
                unseen[key] = unseen.get(key, 0) + 1
    for why, count in sorted(unseen.items()):
        console.print(f"[yellow]not observed[/] ×{count} — {_t(why)}")
    cal = run.calibration
    console.print(
        f"Calibration: {cal.met} of {cal.total} expectations met, {cal.not_met} not met, "
        f"{cal.not_observed} not observed."
    )
    if any(row.repetitions > 1 for row in run.aggregate):
        for line in repetition_lines(run):
            console.print(line)
    else:
        console.print(
            "One repetition per scenario: this demonstrates capability, not reliability "
            "(use --repetitions N, N >= 3)."
        )
    console.print(_t(sentence(f"Passes at once: {concurrency_statement(run)}")), highlight=False)
    sessions = sessions_statement(run)
    if sessions is not None:
        console.print(_t(sentence(f"bpftrace sessions: {sessions}")), highlight=False)
    for name, status in sorted(run.observers.items()):
        if not status.available and status.detail.get("probed", True):
            console.print(f"[yellow]{_t(name)} unavailable:[/] {_t(status.reason or '')}")
    console.print(
        "The exit status says whether the instrument's observations matched the scenarios' "
        "expectations; it does [bold]not[/] say that every backup was correct."
    )


def verification_table(report: VerifyReport) -> Table:
    """Every check of one archive: what was expected and what was found."""
    table = Table(title=f"Verification of {_t(str(report.archive))}", title_justify="left")
    for column in ("check", "status", "expected", "found"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        colour = "green" if check.passed else "red"
        table.add_row(
            _t(check.name),
            f"[{colour}]{_t(check.status)}[/]",
            _t(check.expected),
            _t(check.found),
        )
    return table


def print_verification(report: VerifyReport, console: Console) -> None:
    """The whole expected/found table, the warnings, and (when it passed) the verdict line."""
    console.print(verification_table(report))
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {_t(warning)}", soft_wrap=True)
    if not report.ok:
        return
    verdict = (
        "authenticity established for that key"
        if report.authenticity_established
        else "integrity verified; authenticity not established"
    )
    console.print(
        f"[green]OK[/]: {_t(str(report.archive))}, run {_t(str(report.run_id))}, "
        f"key {_t(str(report.key_id))} ({_t(str(report.key_source))}): {verdict}.",
        soft_wrap=True,
    )


def selftest_table(cases: list[SelftestCase], archive: str) -> Table:
    """Each tampered copy and whether verification caught it."""
    table = Table(title=f"Self-test on copies of {_t(archive)}", title_justify="left")
    for column in ("case", "tampering", "expected", "outcome", "reason"):
        table.add_column(column, overflow="fold")
    for case in cases:
        colour = "green" if case.ok else "red"
        table.add_row(
            _t(case.name),
            _t(case.tampering),
            _t(case.expected),
            f"[{colour}]{_t(case.outcome)}[/]",
            _t(case.reason),
        )
    return table


def print_archive(info: ArchiveInfo, console: Console) -> None:
    """Where the archive is, who signed it, and the commands that verify it."""
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


def print_evaluation(evaluation: Evaluation, console: Console) -> None:
    """The candidate's verified result: status, k/N per clause, the untraced timing ratio."""
    console.print(
        f"Evaluation {_t(evaluation.evaluation_id)}: [bold]{_t(evaluation.status)}[/]"
        + (f" — {_t(evaluation.status_reason)}" if evaluation.status_reason else "")
    )
    for clause, row in (evaluation.clauses or {}).items():
        console.print(
            f"  {clause}: {row.passed}/{row.exercised} passed where exercised"
            f" ({row.failed} fail, {row.not_observed} not observed,"
            f" {row.not_exercised} of {row.total} not exercised)"
        )
    check = evaluation.instrument_check
    if check is not None and check.reused_from is not None:
        console.print(
            f"  instrument check: reused from {_t(check.reused_from['archive'])} (not run in "
            "this evaluation; --recalibrate runs it)"
        )
    if evaluation.timing_skipped:
        console.print(f"  timing: {_t(evaluation.timing_skipped)}")
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


def print_merge(
    shards: list[dict[str, Any]],
    evaluation: Evaluation | None,
    campaign: CampaignRecord | None,
    console: Console,
) -> None:
    """What ``lab merge`` adds to a run's summary: each shard archive, and the merged
    evaluation or campaign."""
    for shard in shards:
        console.print(
            _t(
                f"shard {shard['index']}/{shard['count']}: {shard['archive']} "
                f"sha256 {shard['sha256']} ({len(shard['units'])} units)"
            ),
            highlight=False,
        )
    if evaluation is not None:
        print_evaluation(evaluation, console)
    if campaign is not None:
        print_campaign(campaign, console)


def print_campaign(record: CampaignRecord, console: Console) -> None:
    from lab.reports.campaign import campaign_lines  # the campaign's model, for campaigns

    for line in campaign_lines(record):
        console.print(line, highlight=False, markup=False)
