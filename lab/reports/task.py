"""The report of a fixture-task run (``lab evaluate --task``, ``lab campaign`` on a
``campaigns/*/task.yaml``) as an outline of sections, drawn by the Markdown, PDF and HTML
presenters alike (``report.md``, ``report.pdf``, ``report.html``): it draws the stored
record (``results.json``'s document), computes nothing.

    sections = task_outline(document)      # document["evaluation"] or document["campaign"]
    render_markdown(run, files=None, outline=sections)

Shown: the status, every clause with its k of N and its 95 % interval, the required
failing baseline (its commands and the oracle's verdicts on the untouched fixture), the
calibration (judged here, or reused from a named archive), S3's kernel witness (the
oracle's reason, the trace's first violating lines, the evidence files), the nine evidence
items of a campaign, and what the run does not prove.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.reports.run import signing_key_statement, signing_statement
from lab.reports.table import Table
from lab.reports.view import Block, Bullets, Section, TableBlock, Text, Verbatim, widths

EVALUATION_LIMITS = (
    "The clauses judge the fixture's own tests, go vet and the workload's oracle under the "
    "lab's conditions on this machine; they bound, but do not prove, correctness under other "
    "inputs, attackers or machines. Human review still decides whether the contract is "
    "sufficient."
)


def _interval(bar: Any) -> str:
    if not bar:
        return "—"
    return f"{100 * bar[0]:.0f}–{100 * bar[1]:.0f} %"


def clause_table(
    clauses: Mapping[str, Any], requirements: Mapping[str, str], bars: Mapping[str, Any]
) -> Table:
    rows = [
        [
            cid,
            requirements.get(cid, ""),
            f"{n['pass']}/{n['total']}",
            str(n["fail"]),
            str(n["not-observed"]),
            _interval(bars.get(cid)),
        ]
        for cid, n in sorted(clauses.items())
    ]
    header = ["clause", "requirement", "passed (k/N)", "fail", "not observed", "95 % interval"]
    return Table(header, rows)


def calibration_blocks(calibration: Mapping[str, Any] | None) -> list[Block]:
    if not calibration:
        return [Text("Calibration: skipped (--skip-calibration); this contract was not checked.")]
    out: list[Block] = [
        Text(
            f"Calibration of the contract: {calibration['met']}/{calibration['total']} seeds "
            "broke exactly the clauses expected.",
            "strong",
        )
    ]
    reused = calibration.get("reused_from")
    if reused:
        out.append(
            Text(
                f"Reused, not judged in this run: kept in {reused['archive']} (sha256 "
                f"{reused['archive_sha256']}, run {reused['run_id']}, {reused['verified']}, "
                f"{reused['authenticity']}) under the same key {calibration['key']}.",
                "box",
            )
        )
    elif calibration.get("key"):
        out.append(Text(f"Judged in this run (calibration/); its key: {calibration['key']}."))
    rows = [
        [
            name,
            ", ".join(row["expected"]) or "—",
            ", ".join(row["broken"]) or "—",
            "yes" if row["met"] else "NO",
        ]
        for name, row in sorted(calibration["seeds"].items())
    ]
    out.append(TableBlock(Table(["seed", "must break", "broke", "met"], rows)))
    return out


def baseline_blocks(baseline: Mapping[str, Any] | None) -> list[Block]:
    if not baseline:
        return [Text("The baseline was not recorded.")]
    out: list[Block] = [
        Text(
            f"The untouched fixture must {baseline['must']} its baseline commands: it did "
            f"({baseline['status']})."
            if baseline["status"] == baseline["must"]
            else f"The untouched fixture must {baseline['must']}; it did not."
        )
    ]
    rows = [
        [cid, str(c["exit_status"]), "yes" if c["passed"] else "no", f"{c['wall_s']} s"]
        for cid, c in sorted(baseline.get("commands", {}).items())
    ]
    out.append(TableBlock(Table(["command", "exit", "passed", "wall"], rows)))
    oracle = baseline.get("oracle") or {}
    verdicts = oracle.get("verdicts") or {}
    if verdicts:
        rows = [[c, v["observed"], v["reason"]] for c, v in sorted(verdicts.items())]
        out.append(
            TableBlock(Table(["clause", "on the untouched fixture", "why"], rows), widths(40, 90))
        )
    return out


def witness_blocks(repetitions: list[Mapping[str, Any]], where: str) -> list[Block]:
    """S3's verdict per repetition: the oracle's reason, the kernel's first violating lines
    (as the oracle kept them), the evidence files."""
    out: list[Block] = []
    for rep in repetitions:
        verdict = rep["verdicts"].get("S3")
        if verdict is None:
            continue
        label = f"{where}r{rep['index']}"
        out.append(Text(f"{label}: S3 {verdict['observed']}: {verdict['reason']}"))
        figures = (rep.get("oracle") or {}).get("figures") or {}
        lines = figures.get("kernel_witness")
        if lines:
            caption = f"{label}: the kernel's first violating call (strace -f -yy)"
            out.append(Verbatim(caption, str(lines)))
        if verdict["evidence"]:
            out.append(Text("Evidence: " + ", ".join(verdict["evidence"]), "note"))
    return out


def _signing(document: Mapping[str, Any]) -> list[Block]:
    signing = document.get("signing") or {}
    out: list[Block] = [Text(signing_key_statement(signing))]
    statement = signing_statement(signing)
    if statement:
        out.append(Text(statement, "note"))
    return out


def limits_text(limits: Mapping[str, Any] | None) -> list[Block]:
    """The bounds every verification command ran under (absent in older records)."""
    if not limits:
        return []
    shown = ", ".join(f"{k} {v}" for k, v in sorted(limits.items()))
    return [Text(f"Limits of every verification command (part of the evaluation id): {shown}.")]


def command_line(cid: str, c: Mapping[str, Any]) -> str:
    """One verification command's record in words: exit, wall time, time-out, a full disk."""
    full = c.get("disk_full") or []
    return (
        f"command {cid}: exit {c['exit_status']}, {c['wall_s']} s"
        + (", timed out" if c["timed_out"] else "")
        + (f", filled its bounded {', '.join(full)} (ENOSPC)" if full else "")
    )


def evaluation_outline(document: Mapping[str, Any]) -> list[Section]:
    evaluation = document["evaluation"]
    task, cand = evaluation["task"], evaluation["candidate"]
    status = f"Status: {evaluation['status']}" + (
        f" — {evaluation['status_reason']}" if evaluation.get("status_reason") else ""
    )
    verdict: list[Block] = [
        Text(f"Task evaluation: {task['name']} (workload {task['workload']})", "strong"),
        Text(f"Candidate: {cand['kind']} {cand['name']} (sha256 {cand['sha256']})"),
        Text(status, "strong"),
        TableBlock(
            clause_table(
                evaluation.get("clauses", {}),
                task.get("requirements", {}),
                evaluation.get("intervals", {}),
            ),
            widths(34, 200, 50, 30, 50),
        ),
        *limits_text(evaluation.get("limits")),
        Text("Files changed: " + (", ".join(cand["files_changed"]) or "none")),
    ]
    if cand["findings"]:
        verdict.append(Bullets(tuple(f"finding: {f}" for f in cand["findings"])))
    verdict += _signing(document)
    reps: list[Block] = []
    for rep in evaluation["repetitions"]:
        lines = [f"{c} {v['observed']}: {v['reason']}" for c, v in sorted(rep["verdicts"].items())]
        lines += [command_line(cid, c) for cid, c in sorted(rep["commands"].items())]
        reps += [Text(f"Repetition r{rep['index']}", "strong"), Bullets(tuple(lines))]
    return [
        Section("Verdict", 0, verdict),
        Section("The required failing baseline", 0, baseline_blocks(evaluation.get("baseline"))),
        Section("Calibration", 0, calibration_blocks(evaluation.get("calibration"))),
        Section("S3: the kernel as a witness", 0, witness_blocks(evaluation["repetitions"], "")),
        Section("Repetitions", 0, reps),
        Section("What this evaluation does not prove", 0, [Text(EVALUATION_LIMITS)]),
    ]


def campaign_outline(document: Mapping[str, Any]) -> list[Section]:
    campaign = document["campaign"]
    task = campaign["task"]
    rows = [
        [
            str(rep["index"]),
            rep["outcome"],
            ", ".join(rep["failed_clauses"]) or "—",
            f"{rep['duration_s']:.1f}",
            (rep["patch_sha256"] or "")[:16],
        ]
        for rep in campaign["repetitions"]
    ]
    clauses = [
        [cid, f"{row['met']}/{row['total']}", _interval(row.get("interval"))]
        for cid, row in sorted(campaign["clauses"].items())
    ]
    verdict: list[Block] = [
        Text(f"Agent campaign: {task['name']} (workload {task['workload']})", "strong"),
        Text(f"Agent: {campaign['agent']['command']}, budget {campaign['agent']['budget_s']} s"),
        Text(
            f"Met the task: {campaign['met']} of {len(campaign['repetitions'])} (required "
            f"{campaign['required']}). One repetition that meets the task shows capability; "
            "only repetition measures reliability.",
            "strong",
        ),
        TableBlock(
            Table(["repetition", "outcome", "failed clauses", "duration (s)", "patch"], rows)
        ),
        TableBlock(Table(["clause", "repetitions that passed it", "95 % interval"], clauses)),
        *_signing(document),
    ]
    witness: list[Block] = []
    escalation = _escalation_blocks(campaign)
    for rep in campaign["repetitions"]:
        judged = rep.get("evaluation") or {}
        witness += witness_blocks(judged.get("repetitions", []), f"repetition {rep['index']}, ")
    evidence = tuple(f"{row['item']}: {row['where']}" for row in campaign["evidence"])
    return [
        Section("Verdict", 0, verdict),
        *([Section("Escalation", 0, escalation)] if escalation else []),
        Section("The required failing baseline", 0, [Text(_campaign_baseline(campaign))]),
        Section("Calibration", 0, calibration_blocks(campaign.get("instrument_check") or None)),
        Section("S3: the kernel as a witness", 0, witness or [Text("No repetition was judged.")]),
        Section("The nine evidence items", 0, [Bullets(evidence)]),
        Section("What this campaign does not prove", 0, [Bullets(tuple(campaign["not_proven"]))]),
    ]


def _escalation_blocks(campaign: Mapping[str, Any]) -> list[Block]:
    """``--escalate-cmd``: verified successes per tier with their 95 % interval, agent time
    and tokens per tier and per verified success, each escalated run; none without it."""
    if not (campaign.get("agent") or {}).get("escalate_command"):
        return []
    summary = campaign["escalation"]
    rows = []
    for tier, name in (("1", "the agent"), ("2", "escalated (--escalate-cmd)")):
        t = summary["tiers"][tier]
        met, bar = f"{t['met']}/{t['runs']}", _interval(t.get("interval"))
        rows.append([f"tier {tier}: {name}", met, bar, f"{t['agent_s']:.1f}", _count(t["tokens"])])
    per_s = summary["agent_s_per_success"]
    rows.append(["per verified success (both tiers)", str(summary["verified_successes"]), "",
                 "—" if per_s is None else f"{per_s:.1f}",
                 _count(summary["tokens_per_success"])])  # fmt: skip
    runs = tuple(
        f"r{rep['index']}: {rep['outcome']} → escalated: {rep['escalation']['outcome']}; "
        f"failed clauses: {', '.join(rep['escalation']['failed_clauses']) or 'none'}"
        for rep in campaign["repetitions"]
        if rep.get("escalation")
    )
    head = ["", "met", "95 % interval", "agent time (s)", "tokens"]
    return [
        TableBlock(Table(head, rows)),
        *([Bullets(runs)] if runs else []),
        Text(
            f"Escalated to: {campaign['agent']['escalate_command']}. What escalation cost is "
            "tier 2's agent time and tokens; each escalated run got a fresh workspace and the "
            "signed evidence package of the run it retried (repetitions/rN/escalation-package; "
            "its own evidence in repetitions/rN/escalation/), and was judged by the same gates."
        ),
    ]


def _count(value: Any) -> str:
    return "unread" if value is None else f"{value:,}"


def _campaign_baseline(campaign: Mapping[str, Any]) -> str:
    baseline = campaign.get("baseline") or {}
    return (
        f"The untouched fixture must {baseline.get('must', 'fail')} its baseline commands: "
        f"it did ({baseline.get('status', 'not recorded')}); its commands' records are in "
        "baseline/."
    )


def task_outline(document: Mapping[str, Any]) -> list[Section]:
    """The sections of a task run's report, from its results.json document."""
    if document.get("campaign") is not None:
        return campaign_outline(document)
    return evaluation_outline(document)
