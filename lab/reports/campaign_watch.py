"""Rows about what the agent *did* (issue 23): its network (A1 egress, connections, model
requests and tokens), its processes (execs, the task's verification commands run and their
exit statuses, CPU, peak memory, pids, lingering processes) and what it left in HOME and
/tmp. Wording only: every figure is stored in :class:`lab.campaign.model.RepetitionRecord`.

    watched_lines(rep)          # the console's lines after a repetition
    agent_table(record)         # one row per repetition, for the Markdown and PDF reports
"""

from __future__ import annotations

from typing import Any

from lab.campaign.model import CampaignRecord, RepetitionRecord
from lab.campaign.processes import verification_words
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


def watched_lines(rep: RepetitionRecord) -> list[str]:
    return [
        f"Repetition {rep.index}: {network_words(rep)}",
        f"Repetition {rep.index}: {process_words(rep)}",
    ]


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
