"""Rows about a candidate evaluation (``run.evaluation``): the headline, the candidate's
identity and build, the instrument check, clauses over repetitions, untraced timing,
unnecessary-work diagnostics and the frozen files.

    evaluation_headline(run.evaluation)        # "Candidate evaluation eval-...: FAIL — ..."
    evaluation_clause_table(run.evaluation)    # Table: clause | requirement | outcomes | claim
    evaluation_timing_table(run.evaluation)    # medians and the stored candidate/baseline ratio
"""

from __future__ import annotations

from lab.model import CLAUSE_TITLES, CLAUSES
from lab.model.evaluation import BuildRecord, Evaluation, InstrumentCheck, Timing
from lab.reports.repetitions import clause_counts_cell, repetition_wording
from lab.reports.table import (
    NOT_OBSERVED,
    NOT_RECORDED,
    Table,
    fmt,
    fmt_ratio,
    fmt_seconds,
    fmt_spread,
    sentence,
)

#: what decides an evaluation's exit status
EVALUATION_EXIT_RULE = (
    "For this candidate evaluation, the exit status is 0 only if every contract clause "
    "passed in every repetition of every condition; intermediate errors are kept as evidence "
    "but never decide it."
)
EVALUATION_EXIT_STATEMENT = (
    f"{EVALUATION_EXIT_RULE} The seeded scenarios in this report are the instrument check "
    "that ran first; they fail clauses on purpose."
)


def evaluation_exit_statement(evaluation: Evaluation) -> str:
    """``EVALUATION_EXIT_STATEMENT``, or where the instrument check was reused (no seeded
    scenario ran in this evaluation) the exit rule and where the check came from."""
    check = evaluation.instrument_check
    if check is None or check.reused_from is None:
        return EVALUATION_EXIT_STATEMENT
    return (
        f"{EVALUATION_EXIT_RULE} No seeded scenario ran in this evaluation: its instrument "
        f"check is the one kept in {check.reused_from['archive']} under the same key (see "
        "'instrument check reused from'); --recalibrate runs it again."
    )


#: untraced timing metrics of ``lab.evaluate.timing.alternate``, in report order
TIMING_METRICS: tuple[tuple[str, str], ...] = (
    ("first_backup_wall", "first backup, wall"),
    ("first_backup_cpu", "first backup, CPU"),
    ("unchanged_wall", "unchanged second run, wall"),
    ("unchanged_cpu", "unchanged second run, CPU"),
)
#: the ratio of the clients' shares above the instrument floor (no medians of its own)
ABOVE_FLOOR_ROW = ("first_backup_wall_above_floor", "first backup, wall above the floor")

DIAGNOSTIC_HEADER: tuple[str, ...] = (
    "condition",
    "rep.",
    "inv.",
    "source bytes read",
    "read / file size",
    "hash_file entries",
    "untraced CPU",
    "collectors missing",
)


def evaluation_headline(evaluation: Evaluation | None) -> str | None:
    """One line for the top of the report: the candidate's verified result, k/N per clause."""
    if evaluation is None:
        return None
    line = f"Candidate evaluation {fmt(evaluation.evaluation_id)}: {evaluation.status.upper()}"
    if evaluation.status_reason:
        line += f" — {evaluation.status_reason}"
    if evaluation.clauses:
        parts = [
            f"{c} {evaluation.clauses[c].passed}/{evaluation.clauses[c].total}"
            for c in sorted(evaluation.clauses)
        ]
        line += ". Passed per clause: " + ", ".join(parts)
    return line + "."


def evaluation_refusal(evaluation: Evaluation) -> str | None:
    """The sentence to put in front of everything when the lab refused to judge."""
    if evaluation.status != "refused":
        return None
    why = evaluation.status_reason or "no reason recorded"
    return sentence(f"The lab refused to judge this candidate: {why}")


def evaluation_identity(evaluation: Evaluation) -> list[tuple[str, str]]:
    status = fmt(evaluation.status)
    if evaluation.status_reason:
        status += f" ({evaluation.status_reason})"
    frozen, candidate = evaluation.frozen, evaluation.candidate
    rows = [
        ("evaluation id", fmt(frozen.evaluation_id)),
        ("status", status),
        ("lab version", fmt(frozen.lab_version)),
        ("repetitions", fmt(frozen.repetitions)),
        ("candidate kind", fmt(candidate.kind)),
        ("candidate input", fmt(candidate.input_name)),
        ("candidate input SHA-256", fmt(candidate.input_sha256)),
        ("candidate binary SHA-256", fmt(candidate.binary_sha256)),
        ("build status", fmt(candidate.build.status)),
        *_build_rows(candidate.build),
    ]
    check = evaluation.instrument_check
    if check is not None:
        caught = check.caught
        detail = "; ".join(
            f"{name}: " + ", ".join(f"{c} {caught[name][c]}" for c in sorted(caught[name]))
            for name in sorted(caught)
        )
        verdict = "caught the seeded defects" if check.ok else "did NOT catch the seeded defects"
        rows.append(("instrument check", f"{verdict} ({detail or NOT_RECORDED})"))
        rows.extend(instrument_source(check))
    contract = evaluation.client_contract
    if contract is not None:
        if contract.honoured:
            rows.append(("client contract v1", "honoured in every invocation"))
        else:
            first = "; ".join(
                f"{v.condition} r{v.repetition} {v.pass_name} inv {v.invocation}: {v.problem}"
                for v in contract.violations[:3]
            )
            rows.append(
                (
                    "client contract v1",
                    f"NOT honoured: {fmt(contract.violation_count)} violation(s); {first}",
                )
            )
    for key, value in (("fixture", frozen.fixture.to_dict()), ("limits", frozen.limits.to_dict())):
        rows.append((key, "; ".join(f"{k}: {fmt(value[k])}" for k in sorted(value))))
    return rows


def instrument_source(check: InstrumentCheck) -> list[tuple[str, str]]:
    """Where the instrument check was made: in this run, or reused from the archive of an
    earlier evaluation under the same key (none for a record made before keys)."""
    source = check.reused_from
    if source is not None:
        return [
            (
                "instrument check reused from",
                f"{source['archive']} (sha256 {source['archive_sha256']}, run "
                f"{source['run_id']}, {source['verified']}, {source['authenticity']}): not run "
                f"in this evaluation; the same key {check.key}",
            )
        ]
    if check.key is not None:
        return [("instrument check key", f"checked in this run; {check.key}")]
    return []


def _build_rows(build: BuildRecord) -> list[tuple[str, str]]:
    """The build's steps, one row per recorded figure (in the order the report always had)."""
    patch, make = build.patch, build.make
    rows: list[tuple[str, object]] = []
    if make is not None:
        rows += [("duration s", make.duration_s), ("exit status", make.exit_status)]
        rows += [("log", make.log)]
    if patch is not None:
        rows += [("patch applied in", patch.applied_in)]
        rows += [("patch exit status", patch.exit_status)]
    if make is not None:
        rows += [("stderr", make.stderr), ("timed out", make.timed_out)]
    if build.why is not None:
        rows.append(("why", build.why))
    return [(f"build {label}", fmt(value)) for label, value in rows]


def evaluation_frozen_files(evaluation: Evaluation) -> Table | None:
    files = evaluation.frozen.files
    if not files:
        return None
    rows = [[name, str(files[name])] for name in sorted(files)]
    notes = ["Hashed before the candidate ran; together they define the evaluation id."]
    return Table(["frozen file", "SHA-256"], rows, notes)


def evaluation_timing_table(evaluation: Evaluation) -> Table | None:
    """Untraced medians per client, the candidate/baseline ratio the timing stored, and the
    instrument floor (the reference uploader timed the same way) beside them."""
    timing = evaluation.timing
    if timing is None:
        if evaluation.timing_skipped is None:
            return None
        return Table(["timing"], [[evaluation.timing_skipped]], [])
    ratios = timing.ratio or {}
    rows = _timing_rows(timing)
    exits = [
        f"{name}: {fmt(timing.clients[name].nonzero_exits)}"
        for name in ("baseline", "candidate", "floor")
        if name in timing.clients
    ]
    notes = [
        f"Untraced runs, {_rounds(timing)}, clients alternated. "
        "Ratio = the median of the rounds' candidate / baseline (a round's two clients ran "
        "next to each other); below 1.00x the candidate is faster; N/A where undefined."
        + (
            " Wall above the floor = (candidate - floor) / (baseline - floor) of the "
            "first-backup medians: the clients' own shares compared, N/A where the baseline's "
            "median is not above the floor's."
            if ABOVE_FLOOR_ROW[0] in ratios
            else ""
        ),
        sentence(f"Method: {fmt(timing.method)}"),
        _floor_note(timing),
        _interval_note(timing),
    ]
    if exits:
        notes.append("Runs that exited non-zero: " + "; ".join(exits) + ".")
    failed = [
        f"{name}: {fmt(timing.clients[name].failed_rounds)} ("
        + "; ".join(timing.clients[name].failures)
        + ")"
        for name in ("baseline", "candidate", "floor")
        if name in timing.clients and timing.clients[name].failed_rounds
    ]
    if failed:
        notes.append(
            "Rounds that failed the check a judged pass gets (not timed; the ratio is N/A): "
            + "; ".join(failed)
            + "."
        )
    return Table(
        [
            "untraced timing",
            "baseline median (range)",
            "candidate median (range)",
            "ratio",
            "instrument floor median (range)",
            "ratio 95% interval",
        ],
        rows,
        notes,
    )


def _timing_rows(timing: Timing) -> list[list[str]]:
    """One row per metric (medians, the stored ratio, the floor, the ratio's interval), and
    the share-above-the-floor row where the timing stored that ratio."""
    base = timing.clients.get("baseline")
    cand = timing.clients.get("candidate")
    floor = timing.clients.get("floor")
    ratios = timing.ratio or {}
    bars = timing.ratio_interval or {}
    rows = [
        [
            label + _least_only(timing, metric),
            fmt_spread(base.spreads.get(metric) if base else None),
            fmt_spread(cand.spreads.get(metric) if cand else None),
            fmt_ratio(ratios.get(metric)),
            fmt_spread(floor.spreads.get(metric) if floor else None),
            _fmt_interval(bars.get(metric)),
        ]
        for metric, label in TIMING_METRICS
    ]
    metric, label = ABOVE_FLOOR_ROW
    if metric in ratios:
        shown = "see the row above"
        rows.append([label, shown, shown, fmt_ratio(ratios[metric]), shown])
        rows[-1].append(_fmt_interval(bars.get(metric)))
    return rows


def _least_only(timing: Timing, metric: str) -> str:
    """ ", first 12 rounds" for a metric the rounds after the least did not time (its
    medians and ratio are the least rounds'); "" for one every round timed."""
    rule = timing.rounds_rule
    if rule is None or not rule.least_only(timing.rounds, "baseline", metric):
        return ""
    return f", first {rule.min_rounds} rounds"


def _rounds(timing: Timing) -> str:
    """How many rounds ran and, where the record has it, the rule that stopped them."""
    if timing.rounds_rule is None:
        return f"{fmt(timing.rounds)} rounds"
    return timing.rounds_rule.sentence(timing.rounds)


def _fmt_interval(bar: list[float] | None) -> str:
    """[low, high] of a ratio as "0.79x - 0.88x"; N/A where the timing stored none."""
    return "N/A" if bar is None else f"{fmt_ratio(bar[0])} - {fmt_ratio(bar[1])}"


def _interval_note(timing: Timing) -> str:
    """How the ratio's interval was computed, or that this record has none."""
    if timing.interval_method is None:
        return "Ratio interval: not computed by the version of the lab that timed this (N/A)."
    return sentence(
        f"Ratio interval: {timing.interval_method}; a speed goal is met only when the whole "
        "interval is under it"
    )


def _floor_note(timing: Timing) -> str:
    """What the floor column is, and how much of the baseline's first backup it is."""
    identity = timing.floor or {}
    floor = timing.clients.get("floor")
    if floor is None:
        why = identity.get("reason") or "not measured by this version of the lab"
        return f"Instrument floor: not measured ({why})."
    text = (
        "Instrument floor: the reference uploader (native/reference/uploader.c, binary "
        f"sha256 {fmt(identity.get('binary_sha256'))}) timed the same way: the least any "
        "correct client takes here; the rest of a median is the client's own."
    )
    rule = timing.rounds_rule
    if rule is not None and rule.later_ran(timing.rounds) and "floor" not in rule.later_rounds:
        text += f" It ran in the first {rule.min_rounds} rounds, as did the share above it."
    share = timing.floor_share("first_backup_wall")
    if share is not None:
        text += f" It is {100.0 * share:.0f}% of the baseline's first-backup wall."
    return text


def evaluation_clause_table(evaluation: Evaluation) -> Table | None:
    clauses = evaluation.clauses
    if clauses is None:
        return None
    rows = []
    for c in CLAUSES:
        counts = clauses.get(c)
        if counts is None:
            rows.append([c, CLAUSE_TITLES[c], NOT_RECORDED, NOT_RECORDED])
            continue
        n = counts.total
        cell = clause_counts_cell(counts.to_dict(), n)
        # k/N over the repetitions that exercised the clause: a not-exercised one is neither
        wording = repetition_wording(counts.passed, counts.exercised)
        if counts.not_exercised:
            wording += f" (over the {counts.exercised} repetitions that exercised it)"
        rows.append([c, CLAUSE_TITLES[c], cell, wording])
    return Table(["clause", "requirement", "outcomes", "claim supported"], rows)


def evaluation_diagnostics_table(evaluation: Evaluation) -> Table | None:
    """Unnecessary-work diagnostics (traced passes): no threshold, kept apart from timing."""
    if not evaluation.diagnostics:
        return None
    rows = [
        [
            fmt(row.condition),
            fmt(row.repetition),
            fmt(row.invocation),
            _observed(row.source_bytes_read),
            _observed(row.read_ratio),
            _observed(row.hash_file_calls),
            NOT_RECORDED if row.cpu_s_untraced is None else fmt_seconds(row.cpu_s_untraced),
            fmt(list(row.missing)) if row.missing else "-",
        ]
        for row in evaluation.diagnostics
    ]
    notes = [
        "From traced passes: diagnostics of unnecessary work, with no threshold; they are "
        "not timings. 'not observed' means the collector named in the last column did not run."
    ]
    return Table(list(DIAGNOSTIC_HEADER), rows, notes)


def _observed(value: float | None) -> str:
    """A traced figure: "not observed" where its collector did not run, never a zero."""
    return NOT_OBSERVED if value is None else fmt(value)


def evaluation_other_rows(evaluation: Evaluation) -> list[tuple[str, str]]:
    """Recorded fields the model does not know, so that nothing recorded is hidden."""
    return [(k, fmt(evaluation.extra[k])) for k in sorted(evaluation.extra)]
