"""Rows about what the agent *did* (issue 23): its network (A1 egress, connections, model
requests and tokens), its processes (execs, the task's verification commands run and their
exit statuses, CPU, peak memory, pids, lingering processes) and what it left in HOME and
/tmp. Wording only: every figure is stored in :class:`lab.model.campaign.RepetitionRecord`.

    watched_lines(rep)          # the console's lines after a repetition
    agent_table(record)         # one row per repetition, for the Markdown and PDF reports
"""

from __future__ import annotations

from typing import Any

from lab.model.campaign import CampaignRecord, RepetitionRecord
from lab.model.processes import verification_words
from lab.model.trajectory import JudgedSnapshot
from lab.reports.table import Table


def _tokens(rep: RepetitionRecord) -> str:
    e = rep.egress
    if e is None:
        return "not witnessed"
    tokens = e.tokens()
    if tokens is None:
        return f"not reported ({e.readable_words()})"
    return f"{tokens['prompt']:,} prompt + {tokens['completion']:,} completion"


def _bytes(value: Any) -> str:
    return "N/A" if value is None else f"{int(value) / 1048576:.1f} MiB"


def _cgroup(rep: RepetitionRecord) -> str:
    stats = rep.agent.cgroup
    if not stats:
        return "not recorded"
    cpu = stats.get("cpu_usage_s")
    return (
        f"CPU {'N/A' if cpu is None else f'{cpu:.2f} s'}, peak memory "
        f"{_bytes(stats.get('memory_peak_bytes'))}, pids peak "
        f"{'N/A' if stats.get('pids_peak') is None else stats['pids_peak']}"
    )


def _left(rep: RepetitionRecord) -> str:
    p = rep.processes
    if p is None or not p.left:
        return "not listed"
    home, tmp = len(p.left.get("home", [])), len(p.left.get("tmp", []))
    more = " (more, not listed)" if p.left.get("truncated") else ""
    return f"HOME {home}, /tmp {tmp} entr{'y' if home + tmp == 1 else 'ies'}{more}"


def network_words(rep: RepetitionRecord) -> str:
    e = rep.egress
    if e is None:
        return "A1 egress not-observed (the network was not witnessed: --agent-network host/none)"
    requests = "N/A" if e.model_requests is None else str(e.model_requests)
    return (
        f"A1 egress {e.verdict} — {e.why}; {len(e.connections)} connection(s) forwarded, "
        f"{requests} model request(s), {_tokens(rep)}"
    )


def process_words(rep: RepetitionRecord) -> str:
    p = rep.processes
    execs = "not witnessed" if p is None else (
        f"{p.exec_count} exec(s)" if p.observed else f"execs not observed ({p.error})"
    )  # fmt: skip
    lingering = rep.agent.lingering_count
    return (
        f"{execs}; {verification_words(p)}; {_cgroup(rep)}; {lingering} lingering "
        f"process(es) killed with its cgroup; left {_left(rep)}"
    )


def _shot(j: JudgedSnapshot) -> str:
    if j.status != "judged":
        return f"s{j.index} {j.status}"
    failed = [c for c, v in j.clauses.items() if v != "pass"]
    return f"s{j.index} " + ("all pass" if not failed else "fails " + ",".join(failed))


def trajectory_words(rep: RepetitionRecord) -> str:
    t = rep.trajectory
    if t is None:
        return "trajectory not recorded"
    shown = "; ".join(_shot(j) for j in t.judged) or "nothing changed"
    regressions = ", ".join(f"{c} (passed s{a}, failed s{b})" for c, a, b in t.regressions)
    plateau = "" if t.plateau_at is None else (
        f"; plateau at s{t.plateau_at} ({t.plateau_k} judged snapshots without a new pass)"
    )  # fmt: skip
    limit = "" if t.limit is None else f" ({t.limit})"
    return (
        f"trajectory: {t.taken} snapshot(s), {t.distinct} distinct{limit}: {shown}"
        + (f"; regression: {regressions}" if regressions else "")
        + plateau
    )


def watched_lines(rep: RepetitionRecord) -> list[str]:
    return [
        f"Repetition {rep.index}: {network_words(rep)}",
        f"Repetition {rep.index}: {process_words(rep)}",
        f"Repetition {rep.index}: {trajectory_words(rep)}",
    ]


def trajectory_table(record: CampaignRecord) -> Table:
    clauses = list(record.task.get("clauses", []))
    rows = []
    for rep in record.repetitions:
        for j in () if rep.trajectory is None else rep.trajectory.judged:
            marks = [*(f"new pass {c}" for c in j.new_passes),
                     *(f"REGRESSION {c}" for c in j.regressions),
                     *(["plateau"] if j.plateau else [])]  # fmt: skip
            rows.append(
                [str(rep.index), f"s{j.index}", f"{j.at_s:.1f} s", j.status,
                 *(j.clauses.get(c, "—") for c in clauses), "; ".join(marks) or "—"]
            )  # fmt: skip
    return Table(
        ["rep", "snapshot", "at", "status", *clauses, "marks"],
        rows,
        notes=[
            "Each distinct state of the workspace (polled while the agent worked, committed "
            "to the lab's own git directory, in final.bundle) judged afterwards like the "
            "final result, untimed, at most 6 per repetition. A regression is a clause that "
            "passed and then failed; a plateau, judged snapshots in a row with no new pass.",
        ],
    )


def agent_table(record: CampaignRecord) -> Table:
    rows = []
    for rep in record.repetitions:
        e, p = rep.egress, rep.processes
        rows.append(
            [
                str(rep.index),
                rep.agent_verdicts["A1"],
                "—" if e is None else ", ".join(e.disallowed[:4]) or "none",
                "—" if e is None or e.model_requests is None else str(e.model_requests),
                _tokens(rep),
                "—" if p is None or p.exec_count is None else str(p.exec_count),
                verification_words(p),
                _cgroup(rep),
                str(rep.agent.lingering_count),
                _left(rep),
            ]
        )
    return Table(
        ["rep", "A1 egress", "other destinations", "model requests", "tokens", "execs",
         "verification runs (exit statuses)", "cgroup", "lingering", "left behind"],
        rows,
        notes=[
            "A1 egress: every packet the capture inside the agent's own namespace saw went to "
            "or came from an allowed endpoint (--agent-network model=HOST:PORT); an attempt "
            "the kernel refused before any packet existed (a raw socket without CAP_NET_RAW, "
            "no route) leaves no packet and is not in this count. Requests and tokens are "
            "read from the forwarded plain-HTTP stream (repetitions/rN/egress/); TLS is not "
            "readable. Execs: bpftrace on the agent's cgroup (repetitions/rN/processes/).",
        ],
    )  # fmt: skip
