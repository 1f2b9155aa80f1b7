"""A merged run's ``timeline.jsonl``: every shard's rows on one time base.

Each shard wrote its rows on its own machine's CLOCK_MONOTONIC, which counts from that
machine's boot: two shards' ``t_ns`` cannot be compared. What they share is CLOCK_REALTIME,
and every shard's first row (``event: time-base``) holds the offset (realtime minus
monotonic) it measured at its start and its end, with their uncertainty. The merged
timeline converts each shard's row to CLOCK_REALTIME with its own shard's offset,
interpolated between the two measurements as the shard's own conversion did, and sorts
them; each row keeps its shard's ``shard_t_ns`` and the ``shard_offset_ns`` used.

What the offsets cannot give is the difference between two machines' realtime clocks: the
lab measures none (each is as close to true time as its NTP keeps it). So within one shard
(one invocation, one scenario repetition) the order and the intervals hold to that shard's
conversion uncertainty; across shards the order is only as good as the machines' clock
synchronisation, which the first row says was not measured
(``across_shards_uncertainty_ns: null``).

    shards = [(1, run_dir / "shards/1/timeline.jsonl"), (2, ...)]
    summary = write_merged_timeline(shards, run_dir / "timeline.jsonl")
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.host.clock import TIME_BASE, ClockOffset
from lab.run.timeline import HEADER_EVENT, SOURCE_ORDER

#: the merged timeline's time base
MERGED_TIME_BASE = "CLOCK_REALTIME"
#: what the merged timeline cannot order, in words (its first row, the report, the docs)
ACROSS_SHARDS = (
    "not measured: each shard's rows were converted with that shard's own measured "
    "realtime offset, but the difference between the shards' machines' realtime clocks "
    "(their NTP synchronisation) was not measured, so rows of different shards are ordered "
    "only as well as those clocks agree"
)


def offset_for(mono_ns: int, start: ClockOffset, end: ClockOffset) -> int:
    """The shard's realtime offset at ``mono_ns``: linear between its two measurements,
    the nearer one outside them."""
    if end.at_ns == start.at_ns:
        return start.offset_ns
    frac = min(1.0, max(0.0, (mono_ns - start.at_ns) / (end.at_ns - start.at_ns)))
    return start.offset_ns + round(frac * (end.offset_ns - start.offset_ns))


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A JSON-lines file's rows; a line that is no JSON object kept as ``unparsed`` text or
    ``value``, never dropped."""
    rows: list[dict[str, Any]] = []
    if not path.is_file():
        return rows
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = {"unparsed": line.rstrip("\n")}
            rows.append(row if isinstance(row, dict) else {"value": row})
    return rows


def _offsets(header: dict[str, Any] | None) -> tuple[ClockOffset, ClockOffset] | None:
    if header is None or header.get("time_base") != TIME_BASE:
        return None
    try:
        raw = header["realtime_offset"]
        return ClockOffset.from_dict(raw["start"]), ClockOffset.from_dict(raw["end"])
    except (KeyError, TypeError, ValueError):
        return None


def merged_rows(shards: Sequence[tuple[int, Path]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every shard's rows on CLOCK_REALTIME, sorted, and the header that says how."""
    converted: list[dict[str, Any]] = []
    unconverted: list[dict[str, Any]] = []
    bases: list[dict[str, Any]] = []
    for index, path in shards:
        rows = read_rows(path)
        header = rows[0] if rows and rows[0].get("event") == HEADER_EVENT else None
        offsets = _offsets(header)
        body = rows[1:] if header is not None else rows
        if offsets is None:
            bases.append({"shard": index, "converted": False, "reason": _why_not(header)})
            unconverted += [{"shard": index, **row} for row in body]
            continue
        start, end = offsets
        assert header is not None
        bases.append(
            {
                "shard": index,
                "converted": True,
                "time_base": TIME_BASE,
                "realtime_offset": header["realtime_offset"],
                "uncertainty_ns": header.get("uncertainty_ns"),
            }
        )
        for row in body:
            mono = row.get("t_ns")
            if not isinstance(mono, int):
                unconverted.append({"shard": index, **row})
                continue
            offset = offset_for(mono, start, end)
            converted.append(
                {
                    **row,
                    "shard": index,
                    "t_ns": mono + offset,
                    "shard_t_ns": mono,
                    "shard_offset_ns": offset,
                }
            )
    converted.sort(key=lambda r: (r["t_ns"], SOURCE_ORDER.get(r.get("source", ""), 99), r["shard"]))
    within = [b["uncertainty_ns"] for b in bases if isinstance(b.get("uncertainty_ns"), int)]
    header_row: dict[str, Any] = {
        "t_ns": converted[0]["t_ns"] if converted else 0,
        "source": "runner",
        "event": HEADER_EVENT,
        "time_base": MERGED_TIME_BASE,
        "clock": f"{MERGED_TIME_BASE} (each shard's {TIME_BASE} plus its measured offset)",
        "shards": bases,
        "uncertainty_ns": max(within) if within else None,
        "across_shards_uncertainty_ns": None,
        "across_shards": ACROSS_SHARDS,
    }
    if unconverted:
        header_row["unconverted_rows"] = len(unconverted)
    return [header_row, *converted, *unconverted], header_row


def _why_not(header: dict[str, Any] | None) -> str:
    if header is None:
        return "its timeline.jsonl names no time base: its rows are kept as written, last"
    return (
        f"its time base is {header.get('time_base')!r} with no usable realtime offset: its "
        "rows are kept as written, last"
    )


def write_merged_timeline(shards: Sequence[tuple[int, Path]], dest: Path) -> dict[str, Any]:
    """Write the merged timeline; return what ``results.json`` → ``environment.time_base``
    says of it."""
    rows, header = merged_rows(shards)
    with open(dest, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    return {
        "time_base": MERGED_TIME_BASE,
        # keyed by shard index: a record per shard, never a list of records in a report cell
        "shards": {
            str(b["shard"]): {k: v for k, v in b.items() if k != "shard"} for b in header["shards"]
        },
        "uncertainty_ns": header["uncertainty_ns"],
        "across_shards": ACROSS_SHARDS,
        "file": dest.name,
    }
