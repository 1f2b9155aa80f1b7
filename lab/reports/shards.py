"""Rows about shards: which shard archives a merged run was made of (``lab merge``), or
which share of a run this shard ran (``lab run --shard I/N``).

    shards_table(run)       # a merged run: one row per shard archive, with its digest
    shard_statement(run)    # a shard's own report: "Shard 2 of 3 of run …: 6 of 18 units"
"""

from __future__ import annotations

from lab.model import RunResult
from lab.reports.table import NOT_RECORDED, Table, fmt


def has_shards(run: RunResult) -> bool:
    return bool(run.shards) or run.shard is not None


def _units(units: list[dict[str, object]]) -> str:
    return ", ".join(
        f"{u.get('scenario', u.get('condition'))} r{u.get('repetition')}" for u in units
    )


def shard_statement(run: RunResult) -> str | None:
    """For one shard's run: what it is a part of, and how to make the whole."""
    record = run.shard
    if not record:
        return None
    units = list(record.get("units") or [])
    return (
        f"This run is shard {record.get('index')} of {record.get('count')} of run "
        f"{record.get('run_id')}: it ran {len(units)} unit(s) ({_units(units)}). Its "
        "figures cover those units only; 'python -m lab merge' verifies every shard's archive "
        "and writes the whole run."
    )


def shards_table(run: RunResult) -> Table:
    """For a merged run: one row per shard archive, in shard order."""
    rows = [
        [
            f"{r.get('index')}/{r.get('count')}",
            str(r.get("archive", NOT_RECORDED)),
            str(r.get("sha256", NOT_RECORDED)),
            _units(list(r.get("units") or [])),
            str(r.get("run_id", NOT_RECORDED)),
            str(r.get("kernel") or NOT_RECORDED),
            f"{r.get('started_at', NOT_RECORDED)} - {r.get('finished_at', NOT_RECORDED)}",
        ]
        for r in run.shards
    ]
    units = sum(len(r.get("units") or []) for r in run.shards)
    kind = "condition × repetition" if run.evaluation is not None else "scenario × repetition"
    kind = "agent runs" if run.campaign is not None else kind
    notes = [
        f"This run was merged from {fmt(len(run.shards))} shard archives holding {fmt(units)} "
        f"units ({kind}), each verified against the trusted key before it was "
        "read; every verdict is the one its shard gave, and the aggregates count all "
        "repetitions. Each archive is a resolved dependency of this run's provenance, with "
        "its SHA-256.",
        "Each shard ran on its own machine with its own clock: timings compare within a shard. "
        "timeline.jsonl holds every shard's rows on CLOCK_REALTIME, each converted with the "
        "realtime offset its own shard measured (its uncertainty in the first row); the "
        "offset between the machines' clocks was not measured, so the order of rows from "
        "different shards is only as good as their clock synchronisation. commands.jsonl "
        "holds every shard's rows, tagged with the shard, and shards/<I>/ keeps each shard's "
        "own signed records.",
    ]
    if run.evaluation is not None:
        notes.append(_evaluation_note(run.shards))
    if run.campaign is not None:
        notes.append(
            "Every shard checked the instrument and judged the unchanged client (the baseline) "
            "on its own machine before its agent runs; the campaign's are shard 1's. Each agent "
            "run was judged and timed on its shard's machine, against the baseline alternated "
            "there."
        )
    return Table(
        ["shard", "archive", "SHA-256", "units", "shard run", "kernel", "ran"], rows, notes
    )


def _evaluation_note(records: list[dict[str, object]]) -> str:
    """Where a merged evaluation's instrument check and timing come from."""
    checked = [str(r.get("index")) for r in records if r.get("instrument_check_ok") is True]
    timed = [str(r.get("index")) for r in records if r.get("timed") is True]
    return (
        "Every shard checked the instrument on its own machine before judging its units "
        f"(caught the seeded defects in shard(s) {', '.join(checked) or 'none'}); the "
        "evaluation's instrument check is shard 1's. The untraced timing rounds ran in "
        f"shard(s) {', '.join(timed) or 'none'} only: one machine's alternated rounds give "
        "the ratio."
    )
