"""The run-level records ``results.json`` keeps as plain objects, typed: which shard a run
was (``ShardRecord``), how many passes ran at once (``ConcurrencyRecord``), why a run is
incomplete (``IncompleteRecord``), the signing identity (``SigningRecord``). They are
``TypedDict``s: the same dictionaries at run time, checked by mypy where they are built and
read.

    record: ShardRecord = {"index": 1, "count": 2, "run_id": frozen, "unit": "scenario",
                           "units": [...]}
"""

from __future__ import annotations

from typing import Any, TypedDict


class ShardRecord(TypedDict):
    """``shard``: which share of a run this one ran (``lab.run.shard``)."""

    index: int
    count: int
    #: the frozen run id every shard of the run shares
    run_id: str
    #: what a unit is: "scenario", "condition" or "agent-run"
    unit: str
    units: list[dict[str, Any]]


class ConcurrencyRecord(TypedDict):
    """``concurrency``: ``--jobs N`` asked, passes run at once, and why not
    (``lab.run.schedule``)."""

    jobs_requested: int
    jobs: int
    overlapping: list[str]
    concurrent_passes: int
    why_sequential: str | None


class IncompleteRecord(TypedDict):
    """``incomplete``: an interrupted run (``lab.run.interrupt``), never signed or packed."""

    reason: str


class SigningRecord(TypedDict):
    """``signing``: the key the archive is signed with (``lab.evidence.signing``)."""

    ephemeral: bool
    key_id: str
    fingerprint: str
    source: str
    authenticity: str
    notice: str | None
