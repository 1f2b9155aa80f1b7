"""Rows about an agent campaign: the headline (k of N and the capability-versus-reliability
sentence), one row per repetition, per-clause k/N, the nine evidence items and where they
live, and what the campaign does not prove. Markdown, PDF and console draw these.

    campaign_headline(record)        # "Agent campaign: 2 of 3 repetitions met the task ..."
    campaign_sections(record)        # [(title, Table or sentences), ...]
    campaign_lines(record)           # the console's lines

Every figure comes from :class:`lab.model.campaign.CampaignRecord`; nothing is computed here
but wording.
"""

from __future__ import annotations

from lab.model.campaign import EVIDENCE, NOT_PROVEN, CampaignRecord
from lab.reports.repetitions import repetition_wording
from lab.reports.table import Table

CAMPAIGN_EXIT_STATEMENT = (
    "Exit status of lab campaign: 0 when at least the required number of repetitions met "
    "the task (every required clause passed in every evaluation repetition, and the speed "
    "goal held where there is one), 1 when fewer did, 2 for usage or configuration errors. "
    "A repetition's outcome is the verified result of its candidate, never the agent's own "
    "exit status or summary."
)


def reliability_sentence(record: CampaignRecord) -> str:
    """Capability versus reliability (the second seed article: 1 success, then 0 of 3)."""
    k, n = record.met, record.total
    wording = repetition_wording(k, n)
    if n < 3:
        return (
            f"{k} of {n} met the task: {wording}. One success demonstrates capability, not "
            "reliability; run at least 3 repetitions before any reliability claim."
        )
    if k == 0:
        return f"0 of {n} met the task: capability not demonstrated here ({wording})."
    return (
        f"{k} of {n} met the task: capability demonstrated, {wording}. Reliability is the "
        f"count, not the best run: a claim that the agent 'can do it' rests on {k} of {n}."
    )


def campaign_headline(record: CampaignRecord) -> str:
    verdict = "met" if record.succeeded else "did not meet"
    return (
        f"Agent campaign {record.task.get('name', '')}: {record.met} of {record.total} "
        f"repetitions met the task; the campaign {verdict} its requirement of "
        f"{record.required}. {reliability_sentence(record)}"
    )


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def _ratio(value: float | None, interval: list[float] | None = None) -> str:
    """The ratio, and its 95 % interval where the timing computed one."""
    if value is None:
        return "N/A"
    bar = "" if interval is None else f" (95% {interval[0]:.2f}–{interval[1]:.2f}×)"
    return f"{value:.2f}×{bar}"


def repetition_table(record: CampaignRecord) -> Table:
    rows = []
    for r in record.repetitions:
        patch = r.patch
        rows.append(
            [
                str(r.index),
                r.outcome,
                ", ".join(sorted(r.failed_clauses)) or "—",
                _seconds(r.duration_s),
                "—" if r.agent.timed_out else str(r.agent.exit_status),
                "—" if patch is None else f"{patch.bytes:,} B",
                "—" if patch is None else patch.sha256[:16],
                _ratio(r.timing_ratio, r.timing_ratio_interval),
                r.reason,
            ]
        )
    metric = (record.task.get("speed") or {}).get("metric", "first_backup_wall")
    return Table(
        ["rep", "outcome", "failed clauses", "agent time", "agent exit", "patch", "patch sha256",
         f"timing ({metric})", "why"],
        rows,
        notes=[
            "Each repetition's patch (repetitions/rN/patch.diff) is kept whatever its outcome; "
            "timing is candidate median / baseline median, untraced, sandboxed alike, with its "
            "95% interval (paired bootstrap over the alternated rounds); a speed goal is met "
            "only when the whole interval is under it."
        ],
    )  # fmt: skip


def aggregate_table(record: CampaignRecord) -> Table:
    n = record.total
    rows = [["met the task", f"{record.met}/{n}", f"required {record.required}"]]
    for outcome, count in record.outcome_counts().items():
        if count and outcome != "met":
            rows.append([outcome, f"{count}/{n}", ""])
    for clause, k in record.clause_counts().items():
        rows.append([f"{clause} passed", f"{k}/{n}", "in every evaluation repetition"])
    spread = record.duration_spread()
    if spread is not None:
        rows.append(
            [
                "agent time",
                f"median {_seconds(spread['median'])}",
                f"range {_seconds(spread['min'])} – {_seconds(spread['max'])}",
            ]
        )
    return Table(["", "k/N", "note"], rows)


def identity_rows(record: CampaignRecord) -> list[tuple[str, str]]:
    task = record.task
    speed = task.get("speed")
    rows = [
        ("task", f"{task.get('name')} ({task.get('file')}, sha256 {task.get('sha256')})"),
        ("agent command", record.agent_command),
        ("agent files", ", ".join(f"{k} sha256 {v}" for k, v in record.agent_files.items())
         or "none"),
        ("agent network", record.agent_network),
        ("agent environment", "the sandbox's allow-list, LAB_REPETITION, LAB_TASK"
         + "".join(f", {name}" for name in record.agent_env) + " (values never recorded)"),
        ("budget", f"{record.budget_s:g} s per repetition (the only limit)"),
        ("repetitions", f"{record.total} run, {record.required} required"),
        ("success criteria", "clauses " + ", ".join(task.get("clauses", [])) + " pass in every "
         "evaluation repetition" + ("" if not speed else
         f"; untraced {speed['metric']} ≤ {speed['max_ratio']}× the baseline's")),
        ("evaluation", f"{record.evaluation_id}; " + ", ".join(
            f"{k} {v}" for k, v in sorted(record.evaluation_options.items()))),
        ("baseline", f"the unchanged client must {record.baseline.get('must')}: it did "
         f"({record.baseline.get('status')})"),
        ("instrument check", "caught the seeded defects" if record.instrument_check.get("ok")
         else "did not catch the seeded defects"),
    ]  # fmt: skip
    return rows


def evidence_table() -> Table:
    return Table(
        ["#", "evidence (second seed article)", "where in this archive"],
        [[str(i), item, where] for i, (item, where) in enumerate(EVIDENCE, start=1)],
    )


def campaign_sections(record: CampaignRecord) -> list[tuple[str, Table | list[str]]]:
    return [
        ("Repetitions", repetition_table(record)),
        ("Aggregate", aggregate_table(record)),
        ("Evidence of every agent run", evidence_table()),
        ("What this campaign does not prove", list(NOT_PROVEN)),
    ]


def campaign_lines(record: CampaignRecord) -> list[str]:
    lines = [campaign_headline(record)]
    for r in record.repetitions:
        failed = ", ".join(sorted(r.failed_clauses)) or "none"
        lines.append(
            f"  r{r.index}: {r.outcome:<13} failed clauses: {failed}; "
            f"agent {_seconds(r.duration_s)}; "
            f"patch {'—' if r.patch is None else r.patch.sha256[:16]}; "
            f"timing {_ratio(r.timing_ratio, r.timing_ratio_interval)}"
        )
    for clause, k in record.clause_counts().items():
        lines.append(f"  {clause}: {k}/{record.total}")
    return lines
