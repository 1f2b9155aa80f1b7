"""``report.md`` of a fixture-task run (``lab evaluate --task``, ``lab campaign`` on a
``campaigns/*/task.yaml``): draws the stored record, computes nothing.

    lines = evaluation_lines(document["evaluation"])       # Markdown lines
    lines = campaign_task_lines(document["campaign"])
"""

from __future__ import annotations

from typing import Any


def _clause_rows(clauses: dict[str, Any], requirements: dict[str, str]) -> list[str]:
    rows = [
        "| clause | requirement | pass | fail | not observed | of |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for cid, n in sorted(clauses.items()):
        rows.append(
            f"| {cid} | {requirements.get(cid, '')} | {n['pass']} | {n['fail']} | "
            f"{n['not-observed']} | {n['total']} |"
        )
    return rows


def calibration_lines(calibration: dict[str, Any] | None) -> list[str]:
    if not calibration:
        return ["Calibration: skipped (--skip-calibration); this contract was not checked here."]
    out = [
        f"Calibration of the contract: {calibration['met']}/{calibration['total']} seeds "
        "broke exactly the clauses expected.",
        "",
        "| seed | must break | broke | met |",
        "| --- | --- | --- | --- |",
    ]
    for name, row in sorted(calibration["seeds"].items()):
        out.append(
            f"| {name} | {', '.join(row['expected']) or '—'} | {', '.join(row['broken']) or '—'}"
            f" | {'yes' if row['met'] else 'NO'} |"
        )
    return out


def limits_lines(limits: dict[str, Any] | None) -> list[str]:
    """The bounds every verification command ran under (absent in older records)."""
    if not limits:
        return []
    shown = ", ".join(f"{k} {v}" for k, v in sorted(limits.items()))
    return ["", f"Limits of every verification command (part of the evaluation id): {shown}."]


def evaluation_lines(evaluation: dict[str, Any]) -> list[str]:
    task = evaluation["task"]
    cand = evaluation["candidate"]
    out = [
        f"# Task evaluation: {task['name']} (workload {task['workload']})",
        "",
        f"Candidate: {cand['kind']} {cand['name']} (sha256 {cand['sha256']})",
        f"Status: **{evaluation['status']}**"
        + (f" — {evaluation['status_reason']}" if evaluation.get("status_reason") else ""),
        "",
    ]
    out += _clause_rows(evaluation.get("clauses", {}), task.get("requirements", {}))
    out += limits_lines(evaluation.get("limits"))
    out += ["", "Files changed: " + (", ".join(cand["files_changed"]) or "none")]
    for finding in cand["findings"]:
        out.append(f"- finding: {finding}")
    out.append("")
    out += calibration_lines(evaluation.get("calibration"))
    out += ["", "## Repetitions", ""]
    for rep in evaluation["repetitions"]:
        out.append(f"### r{rep['index']}")
        for cid, v in sorted(rep["verdicts"].items()):
            out.append(f"- {cid} {v['observed']}: {v['reason']}")
        for cid, c in sorted(rep["commands"].items()):
            full = c.get("disk_full") or []
            out.append(
                f"- command {cid}: exit {c['exit_status']}, {c['wall_s']} s"
                + (", timed out" if c["timed_out"] else "")
                + (f", filled its bounded {', '.join(full)} (ENOSPC)" if full else "")
            )
    out += [
        "",
        "## What this evaluation does not prove",
        "",
        "The clauses judge the fixture's own tests, go vet and the workload's oracle under "
        "the lab's conditions on this machine; they bound, but do not prove, correctness "
        "under other inputs, attackers or machines. Human review still decides whether "
        "the contract is sufficient.",
    ]
    return out


def campaign_task_lines(campaign: dict[str, Any]) -> list[str]:
    task = campaign["task"]
    out = [
        f"# Agent campaign: {task['name']} (workload {task['workload']})",
        "",
        f"Agent: `{campaign['agent']['command']}`, budget {campaign['agent']['budget_s']} s",
        f"Met the task: **{campaign['met']} of {len(campaign['repetitions'])}** "
        f"(required {campaign['required']}).",
        "One repetition that meets the task shows capability; only repetition measures "
        "reliability.",
        "",
        "| repetition | outcome | failed clauses | duration (s) | patch sha256 |",
        "| ---: | --- | --- | ---: | --- |",
    ]
    for rep in campaign["repetitions"]:
        out.append(
            f"| {rep['index']} | {rep['outcome']} | {', '.join(rep['failed_clauses']) or '—'} | "
            f"{rep['duration_s']:.1f} | {(rep['patch_sha256'] or '')[:16]} |"
        )
    out += ["", "| clause | repetitions that passed it |", "| --- | ---: |"]
    for cid, row in sorted(campaign["clauses"].items()):
        out.append(f"| {cid} | {row['met']}/{row['total']} |")
    out += ["", "## Evidence", ""]
    out += [f"- {row['item']}: {row['where']}" for row in campaign["evidence"]]
    out += ["", "## What this campaign does not prove", ""]
    out += [f"- {line}" for line in campaign["not_proven"]]
    return out
