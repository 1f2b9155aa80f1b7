"""The untraced timing part of the evaluation record (``evaluation.timing`` in
``results.json``): per-client spreads over the alternated rounds, the candidate ÷ baseline
median ratios and their 95 % intervals (``lab.evaluate.interval``), the instrument floor, and
the rounds that failed the check a judged pass gets (never timed).

    timing = Timing.from_dict(record["timing"])
    timing.ratio["first_backup_wall"], timing.ratio_interval["first_backup_wall"]
    timing.floor_share("first_backup_wall")     # the floor's median ÷ the baseline's

No I/O lives here; ``lab.model.evaluation`` re-exports these classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, kw_only=True)
class Spread:
    """Median, min and max of the recorded values, and how many there were."""

    median: float
    min: float
    max: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Spread:
        return cls(median=data["median"], min=data["min"], max=data["max"], n=int(data["n"]))


@dataclass(frozen=True, kw_only=True)
class ClientTiming:
    #: metric (``first_backup_wall``, ...) -> its spread over the rounds; None if unrecorded
    spreads: dict[str, Spread | None]
    #: invocations that exited non-zero during the timing rounds
    nonzero_exits: int
    #: rounds that failed the check a judged pass gets (exit 0, a verified backup after
    #: each invocation): kept out of the spreads, and the ratio is N/A
    failed_rounds: int = 0
    #: the first reasons, e.g. "first_backup: no backup in the receiver's store"
    failures: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            metric: None if s is None else s.to_dict() for metric, s in self.spreads.items()
        }
        row["nonzero_exits"] = self.nonzero_exits
        if self.failed_rounds:  # absent: none failed (and records before the check)
            row |= {"failed_rounds": self.failed_rounds, "failures": list(self.failures)}
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClientTiming:
        spreads = {
            str(metric): None if value is None else Spread.from_dict(value)
            for metric, value in data.items()
            if metric not in ("nonzero_exits", "failed_rounds", "failures")
        }
        return cls(
            spreads=spreads,
            nonzero_exits=int(data["nonzero_exits"]),
            failed_rounds=int(data.get("failed_rounds", 0)),
            failures=tuple(str(f) for f in data.get("failures") or ()),
        )


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Untraced timing rounds (``lab.evaluate.timing.alternate``)."""

    rounds: int
    size: int
    method: str
    #: client name ("baseline", "candidate") -> its spreads
    clients: dict[str, ClientTiming]
    #: candidate median ÷ baseline median per metric, stored when both clients ran; None
    #: for a metric where it is undefined
    ratio: dict[str, float | None] | None = None
    #: the 95 % confidence interval [low, high] of each ``ratio`` (None where undefined)
    ratio_interval: dict[str, list[float] | None] | None = None
    #: how ``ratio_interval`` was computed (``lab.evaluate.interval.METHOD``)
    interval_method: str | None = None
    #: the instrument floor's reference uploader (``lab.evaluate.floor``): its source and
    #: binary digests, or the reason it is missing; its spreads are ``clients["floor"]``
    floor: dict[str, str | None] | None = None

    def floor_share(self, metric: str) -> float | None:
        """The instrument floor's median as a fraction of the baseline's, for ``metric``;
        None when either was not measured."""
        floor, base = self.clients.get("floor"), self.clients.get("baseline")
        f = floor.spreads.get(metric) if floor else None
        b = base.spreads.get(metric) if base else None
        return None if f is None or b is None or b.median <= 0 else f.median / b.median

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "rounds": self.rounds,
            "size": self.size,
            "method": self.method,
            "clients": {name: c.to_dict() for name, c in self.clients.items()},
        }
        if self.ratio is not None:
            row["ratio"] = dict(self.ratio)
        if self.ratio_interval is not None:
            row["ratio_interval"] = {
                m: None if v is None else list(v) for m, v in self.ratio_interval.items()
            }
            row["interval_method"] = self.interval_method
        if self.floor is not None:
            row["floor"] = dict(self.floor)
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        ratio = data.get("ratio")
        floor = data.get("floor")
        bars = data.get("ratio_interval")
        return cls(
            rounds=int(data["rounds"]),
            size=int(data["size"]),
            method=str(data["method"]),
            clients={str(n): ClientTiming.from_dict(c) for n, c in data["clients"].items()},
            ratio=None if ratio is None else {str(m): _optional_float(v) for m, v in ratio.items()},
            ratio_interval=None
            if bars is None
            else {str(m): None if v is None else [float(x) for x in v] for m, v in bars.items()},
            interval_method=_optional_str(data.get("interval_method")),
            floor=None if floor is None else {str(k): _optional_str(v) for k, v in floor.items()},
        )
