"""The agent's trajectory, judged from outside: while it works, the lab snapshots its
workspace into the lab's own git directory whenever it changes (a bounded poll); afterwards
each distinct snapshot is judged as the final result is (sandboxed, no network, at most
:data:`MAX_JUDGED`), and the per-clause results over time mark regressions (a clause that
passed and then failed) and plateaus (:data:`PLATEAU_K` judged snapshots in a row with no
clause passing that had not passed before: the second seed article's harness stops after
three equivalent failures).

    picked = pick(taken)                 # distinct snapshots, at most MAX_JUDGED
    record = mark(rows, plateau_k=3, taken=len(taken), distinct=distinct_count(taken))

No I/O here: ``lab.campaign.snapshots`` takes and judges the snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: how many distinct snapshots are judged at most (evenly spread, the last always)
MAX_JUDGED = 6
#: judged snapshots in a row with no new passing clause that make a plateau
PLATEAU_K = 3


@dataclass(frozen=True)
class Snapshot:
    index: int
    #: seconds after the agent started
    at_s: float
    commit: str
    tree: str


@dataclass(frozen=True, kw_only=True)
class JudgedSnapshot:
    index: int
    at_s: float
    commit: str
    #: "judged", "build-failed" or "no-change" (native/ as given)
    status: str
    #: clause -> "pass" | "fail" (empty unless judged)
    clauses: dict[str, str]
    new_passes: tuple[str, ...] = ()
    regressions: tuple[str, ...] = ()
    #: this snapshot ends a run of PLATEAU_K judged snapshots with no new passing clause
    plateau: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgedSnapshot:
        return cls(
            index=int(data["index"]),
            at_s=float(data["at_s"]),
            commit=str(data["commit"]),
            status=str(data["status"]),
            clauses={str(k): str(v) for k, v in (data.get("clauses") or {}).items()},
            new_passes=tuple(data.get("new_passes") or ()),
            regressions=tuple(data.get("regressions") or ()),
            plateau=bool(data.get("plateau")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "at_s": self.at_s,
            "commit": self.commit,
            "status": self.status,
            "clauses": dict(self.clauses),
            "new_passes": list(self.new_passes),
            "regressions": list(self.regressions),
            "plateau": self.plateau,
        }


@dataclass(frozen=True, kw_only=True)
class TrajectoryRecord:
    taken: int
    distinct: int
    judged: tuple[JudgedSnapshot, ...]
    plateau_k: int
    #: the first snapshot that completed a plateau (None: none)
    plateau_at: int | None
    #: (clause, snapshot where it passed, snapshot where it then failed)
    regressions: tuple[tuple[str, int, int], ...]
    #: why fewer than every distinct snapshot was judged, or None
    limit: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrajectoryRecord:
        return cls(
            taken=int(data["taken"]),
            distinct=int(data["distinct"]),
            judged=tuple(JudgedSnapshot.from_dict(j) for j in data.get("judged") or ()),
            plateau_k=int(data["plateau_k"]),
            plateau_at=data.get("plateau_at"),
            regressions=tuple(
                (str(r["clause"]), int(r["passed_at"]), int(r["failed_at"]))
                for r in data.get("regressions") or ()
            ),
            limit=data.get("limit"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "taken": self.taken,
            "distinct": self.distinct,
            "judged": [j.to_dict() for j in self.judged],
            "plateau_k": self.plateau_k,
            "plateau_at": self.plateau_at,
            "regressions": [
                {"clause": c, "passed_at": a, "failed_at": b} for c, a, b in self.regressions
            ],
            "limit": self.limit,
        }


def pick(snapshots: list[Snapshot], limit: int = MAX_JUDGED) -> list[Snapshot]:
    """The distinct snapshots (a tree equal to the one before is dropped), at most
    ``limit`` of them, evenly spread, the last always kept."""
    distinct: list[Snapshot] = []
    for shot in snapshots:
        if not distinct or distinct[-1].tree != shot.tree:
            distinct.append(shot)
    if len(distinct) <= limit:
        return distinct
    step = (len(distinct) - 1) / (limit - 1)
    return [distinct[round(i * step)] for i in range(limit)]


def distinct_count(snapshots: list[Snapshot]) -> int:
    return len(pick(snapshots, limit=len(snapshots) or 1)) if snapshots else 0


def mark(
    rows: list[JudgedSnapshot], *, plateau_k: int = PLATEAU_K, taken: int, distinct: int
) -> TrajectoryRecord:
    """New passes, regressions and plateaus over the judged snapshots, in order."""
    best: set[str] = set()
    last_pass: dict[str, int] = {}
    marked: list[JudgedSnapshot] = []
    regressions: list[tuple[str, int, int]] = []
    quiet = 0
    plateau_at: int | None = None
    for row in rows:
        passing = {c for c, v in row.clauses.items() if v == "pass"}
        new = tuple(sorted(passing - best))
        lost = tuple(sorted(c for c in last_pass if c not in passing))
        for clause in lost:
            regressions.append((clause, last_pass.pop(clause), row.index))
        for clause in passing:
            last_pass[clause] = row.index
        best |= passing
        quiet = 0 if new else quiet + 1
        plateau = quiet >= plateau_k
        if plateau and plateau_at is None:
            plateau_at = row.index
        marked.append(
            JudgedSnapshot(
                index=row.index, at_s=row.at_s, commit=row.commit, status=row.status,
                clauses=row.clauses, new_passes=new, regressions=lost, plateau=plateau,
            )
        )  # fmt: skip
    limit = None
    if len(rows) < distinct:
        limit = f"{len(rows)} of {distinct} distinct snapshots judged (at most {MAX_JUDGED})"
    return TrajectoryRecord(
        taken=taken,
        distinct=distinct,
        judged=tuple(marked),
        plateau_k=plateau_k,
        plateau_at=plateau_at,
        regressions=tuple(regressions),
        limit=limit,
    )
