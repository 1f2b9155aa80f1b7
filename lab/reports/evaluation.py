"""Rows about a candidate evaluation (``run.evaluation``): the headline, the candidate's
identity and build, the instrument check, clauses over repetitions, untraced timing,
unnecessary-work diagnostics and the frozen files.

    evaluation_headline(run.evaluation)        # "Candidate evaluation eval-...: FAIL — ..."
    evaluation_clause_table(run.evaluation)    # Table: clause | requirement | outcomes | claim
    evaluation_timing_table(run.evaluation)    # medians and the stored candidate/baseline ratio
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.model import (
    CLAUSE_TITLES,
    CLAUSES,
)
from lab.reports.repetitions import clause_counts_cell, repetition_wording
from lab.reports.table import (
    NOT_OBSERVED,
    NOT_RECORDED,
    Table,
    fmt,
    fmt_ratio,
    fmt_seconds,
    fmt_spread,
)

EVALUATION_EXIT_STATEMENT = (
    "For this candidate evaluation, the exit status is 0 only if every contract clause "
    "passed in every repetition of every condition; intermediate errors are kept as evidence "
    "but never decide it. The seeded scenarios in this report are the instrument check that "
    "ran first; they fail clauses on purpose."
)


#: Keys of ``run.evaluation`` (``lab.evaluate.judge``) this report draws in dedicated tables;
#: anything else is listed under "other recorded fields" so nothing recorded is hidden.
EVALUATION_KEYS = frozenset(
    {
        "evaluation_id",
        "status",
        "status_reason",
        "candidate",
        "instrument_check",
        "client_contract",
        "timing",
        "diagnostics",
        "clauses",
        "repetitions",
        "files",
        "lab_version",
        "fixture",
        "limits",
    }
)


#: untraced timing metrics of ``lab.evaluate.timing.alternate``, in report order
TIMING_METRICS: tuple[tuple[str, str], ...] = (
    ("first_backup_wall", "first backup, wall"),
    ("first_backup_cpu", "first backup, CPU"),
    ("unchanged_wall", "unchanged second run, wall"),
    ("unchanged_cpu", "unchanged second run, CPU"),
)


DIAGNOSTIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("condition", "condition"),
    ("repetition", "rep."),
    ("invocation", "inv."),
    ("source_bytes_read", "source bytes read"),
    ("read_ratio", "read / file size"),
    ("hash_file_calls", "hash_file entries"),
    ("cpu_s_untraced", "untraced CPU"),
)


def evaluation_headline(evaluation: Mapping[str, Any] | None) -> str | None:
    """One line for the top of the report: the candidate's verified result, k/N per clause."""
    if evaluation is None:
        return None
    status = str(evaluation.get("status", NOT_RECORDED)).upper()
    line = f"Candidate evaluation {fmt(evaluation.get('evaluation_id'))}: {status}"
    if evaluation.get("status_reason"):
        line += f" — {evaluation['status_reason']}"
    clauses = evaluation.get("clauses")
    if isinstance(clauses, Mapping) and clauses:
        parts = [
            f"{c} {clauses[c].get('pass')}/{clauses[c].get('total')}"
            for c in sorted(clauses)
            if isinstance(clauses[c], Mapping)
        ]
        line += ". Passed per clause: " + ", ".join(parts)
    return line + "."


def evaluation_refusal(evaluation: Mapping[str, Any]) -> str | None:
    """The sentence to put in front of everything when the lab refused to judge."""
    if evaluation.get("status") != "refused":
        return None
    why = evaluation.get("status_reason") or "no reason recorded"
    return f"The lab refused to judge this candidate: {why}."


def evaluation_identity(evaluation: Mapping[str, Any]) -> list[tuple[str, str]]:
    status = fmt(evaluation.get("status"))
    if evaluation.get("status_reason"):
        status += f" ({evaluation['status_reason']})"
    rows = [
        ("evaluation id", fmt(evaluation.get("evaluation_id"))),
        ("status", status),
        ("lab version", fmt(evaluation.get("lab_version"))),
        ("repetitions", fmt(evaluation.get("repetitions"))),
    ]
    candidate = evaluation.get("candidate")
    if isinstance(candidate, Mapping):
        rows.append(("candidate kind", fmt(candidate.get("kind"))))
        rows.append(("candidate input", fmt(candidate.get("input_name"))))
        rows.append(("candidate input SHA-256", fmt(candidate.get("input_sha256"))))
        rows.append(("candidate binary SHA-256", fmt(candidate.get("binary_sha256"))))
        build = candidate.get("build")
        if isinstance(build, Mapping):
            rows.append(("build status", fmt(build.get("status"))))
            for key in sorted(build):
                if key != "status":
                    rows.append((f"build {key.replace('_', ' ')}", fmt(build[key])))
        else:
            rows.append(("build status", fmt(build)))
        for key in sorted(candidate):
            if key not in ("kind", "input_name", "input_sha256", "binary_sha256", "build"):
                rows.append((f"candidate {key.replace('_', ' ')}", fmt(candidate[key])))
    else:
        rows.append(("candidate", NOT_RECORDED))
    check = evaluation.get("instrument_check")
    if isinstance(check, Mapping):
        caught = check.get("caught")
        detail = (
            "; ".join(
                f"{name}: " + ", ".join(f"{c} {caught[name][c]}" for c in sorted(caught[name]))
                for name in sorted(caught)
                if isinstance(caught[name], Mapping)
            )
            if isinstance(caught, Mapping)
            else fmt(caught)
        )
        ok = check.get("ok")
        verdict = "caught the seeded defects" if ok else "did NOT catch the seeded defects"
        rows.append(("instrument check", f"{verdict} ({detail or NOT_RECORDED})"))
    contract = evaluation.get("client_contract")
    if isinstance(contract, Mapping):
        if contract.get("honoured"):
            rows.append(("client contract v1", "honoured in every invocation"))
        else:
            shown = contract.get("violations") or []
            first = "; ".join(
                f"{v.get('condition')} r{v.get('repetition')} {v.get('pass')} "
                f"inv {v.get('invocation')}: {v.get('problem')}"
                for v in shown[:3]
                if isinstance(v, Mapping)
            )
            rows.append(
                (
                    "client contract v1",
                    f"NOT honoured: {fmt(contract.get('violation_count'))} violation(s); {first}",
                )
            )
    for key in ("fixture", "limits"):
        value = evaluation.get(key)
        if isinstance(value, Mapping):
            rows.append((key, "; ".join(f"{k}: {fmt(value[k])}" for k in sorted(value))))
    return rows


def evaluation_frozen_files(evaluation: Mapping[str, Any]) -> Table | None:
    files = evaluation.get("files")
    if not isinstance(files, Mapping) or not files:
        return None
    rows = [[name, str(files[name])] for name in sorted(files)]
    notes = ["Hashed before the candidate ran; together they define the evaluation id."]
    return Table(["frozen file", "SHA-256"], rows, notes)


def timing_ratio(candidate: Any, baseline: Any) -> float | None:
    """candidate ÷ baseline median; None where either median is missing or zero."""
    if not isinstance(candidate, Mapping) or not isinstance(baseline, Mapping):
        return None
    c, b = candidate.get("median"), baseline.get("median")
    if not isinstance(c, int | float) or not isinstance(b, int | float) or b <= 0:
        return None
    return float(c) / float(b)


def evaluation_timing_table(evaluation: Mapping[str, Any]) -> Table | None:
    timing = evaluation.get("timing")
    if not isinstance(timing, Mapping):
        return None
    clients = timing.get("clients") or {}
    base = clients.get("baseline") or {}
    cand = clients.get("candidate") or {}
    recorded = timing.get("ratio")
    ratios: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    rows = []
    for metric, label in TIMING_METRICS:
        ratio = (
            ratios.get(metric)
            if metric in ratios
            else timing_ratio(cand.get(metric), base.get(metric))
        )
        rows.append(
            [
                label,
                fmt_spread(base.get(metric)),
                fmt_spread(cand.get(metric)),
                fmt_ratio(ratio if isinstance(ratio, int | float) else None),
            ]
        )
    exits = [
        f"{name}: {fmt(clients[name].get('nonzero_exits'))}"
        for name in ("baseline", "candidate")
        if isinstance(clients.get(name), Mapping)
    ]
    notes = [
        f"Untraced runs, {fmt(timing.get('rounds'))} rounds, clients alternated. "
        "Ratio = candidate median / baseline median; below 1.00x the candidate is faster; "
        "N/A where undefined.",
        f"Method: {fmt(timing.get('method'))}.",
    ]
    if exits:
        notes.append("Runs that exited non-zero: " + "; ".join(exits) + ".")
    return Table(
        ["untraced timing", "baseline median (range)", "candidate median (range)", "ratio"],
        rows,
        notes,
    )


def evaluation_clause_table(evaluation: Mapping[str, Any]) -> Table | None:
    clauses = evaluation.get("clauses")
    if not isinstance(clauses, Mapping):
        return None
    rows = []
    for c in CLAUSES:
        counts = clauses.get(c)
        if not isinstance(counts, Mapping):
            rows.append([c, CLAUSE_TITLES[c], NOT_RECORDED, NOT_RECORDED])
            continue
        n = int(counts.get("total", evaluation.get("repetitions", 0)) or 0)
        k = int(counts.get("pass", 0))
        rows.append([c, CLAUSE_TITLES[c], clause_counts_cell(counts, n), repetition_wording(k, n)])
    return Table(["clause", "requirement", "outcomes", "claim supported"], rows)


def evaluation_diagnostics_table(evaluation: Mapping[str, Any]) -> Table | None:
    """Unnecessary-work diagnostics (traced passes): no threshold, kept apart from timing."""
    diagnostics = evaluation.get("diagnostics")
    if not isinstance(diagnostics, list) or not diagnostics:
        return None
    rows = []
    for row in diagnostics:
        if not isinstance(row, Mapping):
            continue
        cells = []
        for key, _ in DIAGNOSTIC_COLUMNS:
            value = row.get(key)
            if key == "cpu_s_untraced":
                cells.append(fmt_seconds(value) if isinstance(value, int | float) else NOT_RECORDED)
            elif value is None:
                cells.append(NOT_OBSERVED)
            else:
                cells.append(fmt(value))
        missing = row.get("missing") or []
        cells.append(fmt(missing) if missing else "-")
        rows.append(cells)
    notes = [
        "From traced passes: diagnostics of unnecessary work, with no threshold; they are "
        "not timings. 'not observed' means the collector named in the last column did not run."
    ]
    header = [label for _, label in DIAGNOSTIC_COLUMNS] + ["collectors missing"]
    return Table(header, rows, notes)


def evaluation_other_rows(evaluation: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(k, fmt(evaluation[k])) for k in sorted(evaluation) if k not in EVALUATION_KEYS]
