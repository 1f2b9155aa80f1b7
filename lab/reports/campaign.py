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

from lab.intervals import METHOD, percent
from lab.model.campaign import EVIDENCE, NOT_PROVEN, PASS_HAT_K_ESTIMATOR, CampaignRecord
from lab.reports.campaign_watch import agent_table, trajectory_table
from lab.reports.repetitions import repetition_wording
from lab.reports.table import Table

#: how the interval method is named in the report
METHOD_NAME = {"clopper-pearson": "Clopper–Pearson exact", "wilson": "Wilson score"}[METHOD]

CAMPAIGN_EXIT_STATEMENT = (
    "Exit status of lab campaign: 0 when at least the required number of repetitions met "
    "the task (every required clause passed in every evaluation repetition, and the speed "
    "goal held where there is one), 1 when fewer did, 2 for usage or configuration errors. "
    "A repetition's outcome is the verified result of its candidate, never the agent's own "
    "exit status or summary."
)


def _interval(low_high: list[float] | None) -> str:
    if low_high is None:
        return "N/A"
    low, high = low_high
    return f"95 % CI {percent(low)}–{percent(high)} ({METHOD_NAME})"


def _k_of_n(k: int, n: int, low_high: list[float] | None) -> str:
    return f"{k}/{n} [{_interval(low_high)}]"


def reliability_sentence(record: CampaignRecord) -> str:
    """Capability versus reliability (the second seed article: 1 success, then 0 of 3), with
    the stored interval: a one-sided bound at 0 of N and N of N, else the two-sided one."""
    k, n = record.met, record.total
    wording = repetition_wording(k, n)
    if n == 0:
        return "No repetition ran: neither capability nor reliability is shown."
    interval = _interval(record.interval())
    upper, lower = record.upper_bound(), record.lower_bound()
    if k == 0:
        bound = (
            f"0 of {n} is compatible with a true success rate up to "
            f"{percent(upper or 0)} (one-sided 95 %, {METHOD_NAME} upper bound)"
        )
    elif k == n:
        bound = (
            f"{n} of {n} only shows a true success rate of at least {percent(lower or 0)} "
            f"(one-sided 95 %, {METHOD_NAME} lower bound)"
        )
    else:
        bound = f"the true success rate lies in the two-sided {interval}"
    estimates = record.pass_estimates()
    top = str(min(n, len(estimates["pass_at_k"])))
    passes = (
        f"pass@{top} {estimates['pass_at_k'][top]:.2f}, pass^{top} "
        f"{estimates['pass_hat_k'][top]:.2f} (the chance that at least one / all of {top} "
        "tries meet the task, estimated from these runs)"
    )
    if n < 3:
        return (
            f"{k} of {n} met the task: {wording}; {bound}. One success demonstrates "
            "capability, not reliability; run at least 3 repetitions before any reliability "
            f"claim. {passes}."
        )
    if k == 0:
        return f"0 of {n} met the task: capability not demonstrated here ({wording}); {bound}."
    return (
        f"{k} of {n} met the task: capability demonstrated, {wording}; {bound}. Reliability "
        f"is the count, not the best run: a claim that the agent 'can do it' rests on {k} of "
        f"{n}. {passes}."
    )


def campaign_headline(record: CampaignRecord) -> str:
    verdict = "met" if record.succeeded else "did not meet"
    return (
        f"Agent campaign {record.task.get('name', '')}: {record.met} of {record.total} "
        f"repetitions met the task [{_interval(record.interval())}]; the campaign {verdict} "
        f"its requirement of {record.required}. {reliability_sentence(record)}"
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
            "timing is the median of the rounds' candidate / baseline, untraced, sandboxed "
            "alike, with its 95% interval (paired bootstrap over the alternated rounds); a speed "
            "goal is met only when the whole interval is under it."
        ],
    )  # fmt: skip


def aggregate_table(record: CampaignRecord) -> Table:
    n = record.total
    rows = [["met the task", f"{record.met}/{n}", _interval(record.interval()),
             f"required {record.required}"]]  # fmt: skip
    for outcome, count in record.outcome_counts().items():
        if count and outcome != "met":
            rows.append([outcome, f"{count}/{n}", _interval(record.interval(count)), ""])
    for clause, k in record.clause_counts().items():
        rows.append([f"{clause} passed", f"{k}/{n}", _interval(record.interval(k)),
                     "in every evaluation repetition"])  # fmt: skip
    verdicts = [r.agent_verdicts["A1"] for r in record.repetitions]
    if any(v != "not-observed" for v in verdicts):
        k = verdicts.count("pass")
        rows.append(["A1 egress passed", f"{k}/{n}", _interval(record.interval(k)),
                     f"{verdicts.count('not-observed')} not observed"])  # fmt: skip
    estimates = record.pass_estimates()
    for key in estimates["pass_at_k"]:
        rows.append([f"pass@{key} / pass^{key}", f"{estimates['pass_at_k'][key]:.2f} / "
                     f"{estimates['pass_hat_k'][key]:.2f}", "estimates", ""])  # fmt: skip
    spread = record.duration_spread()
    if spread is not None:
        rows.append(
            [
                "agent time",
                f"median {_seconds(spread['median'])}",
                "",
                f"range {_seconds(spread['min'])} – {_seconds(spread['max'])}",
            ]
        )
    return Table(
        ["", "k/N", "95 % interval", "note"],
        rows,
        notes=[f"Intervals: {METHOD_NAME}, two-sided 95 %. pass@k: 1 − C(n−c,k)/C(n,k). "
               f"pass^k: {PASS_HAT_K_ESTIMATOR}."],
    )  # fmt: skip


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


def _tokens(value: int | None) -> str:
    return "unread" if value is None else f"{value:,}"


def escalation_table(record: CampaignRecord) -> Table:
    """Verified successes per tier, agent time and tokens per verified success, and what
    the escalation cost (``--escalate-cmd``)."""
    summary = record.tiers()
    rows = []
    for tier, name in (("1", "the agent"), ("2", "escalated (--escalate-cmd)")):
        t = summary["tiers"][tier]
        met = f"{t['met']}/{t['runs']}" if t["runs"] else "0/0"
        bar = _interval(t["interval"]) if t["interval"] else "—"  # the model's, never computed here
        rows.append([f"tier {tier}: {name}", met, bar, _seconds(t["agent_s"]),
                     _tokens(t["tokens"])])  # fmt: skip
    per_s = summary["agent_s_per_success"]
    rows.append(["per verified success (both tiers)", str(summary["verified_successes"]), "",
                 "—" if per_s is None else _seconds(per_s),
                 _tokens(summary["tokens_per_success"])])  # fmt: skip
    notes = [
        f"r{r.index}: {r.outcome} → escalated: {r.escalation.outcome}; failed clauses: "
        f"{', '.join(sorted(r.escalation.failed_clauses)) or 'none'}"
        for r in record.repetitions
        if r.escalation is not None
    ]
    notes.append(
        "What escalation cost is tier 2's agent time and tokens; each escalated run got a "
        "fresh workspace and the signed evidence package of the run it retried "
        "(repetitions/rN/escalation-package), and was judged by the same gates."
    )
    return Table(["", "met", "95 % interval", "agent time", "tokens"], rows, notes=notes)


def campaign_sections(record: CampaignRecord) -> list[tuple[str, Table | list[str]]]:
    escalation = [] if record.escalate_command is None else [
        ("Escalation", escalation_table(record))]  # fmt: skip
    return [
        ("Repetitions", repetition_table(record)),
        ("Aggregate", aggregate_table(record)),
        *escalation,
        ("What the agent did", agent_table(record)),
        ("Trajectories", trajectory_table(record)),
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
            f"timing {_ratio(r.timing_ratio, r.timing_ratio_interval)}; A1 {r.agent_verdicts['A1']}"
        )
        if r.escalation is not None:
            e = r.escalation
            lines.append(
                f"      escalated: {e.outcome:<13} failed clauses: "
                f"{', '.join(sorted(e.failed_clauses)) or 'none'}; agent {_seconds(e.duration_s)}"
            )
    for clause, k in record.clause_counts().items():
        lines.append(f"  {clause}: {_k_of_n(k, record.total, record.interval(k))}")
    if record.escalate_command is not None:
        summary = record.tiers()
        t1, t2 = summary["tiers"]["1"], summary["tiers"]["2"]
        per_s = summary["agent_s_per_success"]
        lines.append(
            f"  verified successes: tier 1 {t1['met']}/{t1['runs']}, escalated {t2['met']}/"
            f"{t2['runs']}; per verified success: agent "
            f"{'—' if per_s is None else _seconds(per_s)}, tokens "
            f"{_tokens(summary['tokens_per_success'])}; escalation cost: agent "
            f"{_seconds(t2['agent_s'])}, tokens {_tokens(t2['tokens'])}"
        )
    return lines
