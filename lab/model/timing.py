"""The untraced timing part of the evaluation record (``evaluation.timing`` in
``results.json``): per-client spreads over the alternated rounds, the candidate ÷ baseline
median ratios and their 95 % intervals (``lab.evaluate.interval``), the instrument floor, and
the rounds that failed the check a judged pass gets (never timed).

    timing = Timing.from_dict(record["timing"])
    timing.ratio["first_backup_wall"], timing.ratio_interval["first_backup_wall"]
    timing.floor_share("first_backup_wall")     # the floor's median ÷ the baseline's
    timing.rounds_rule.stopped                  # "target", "cap", "fixed", ... (RoundsRule)

No I/O lives here; ``lab.model.evaluation`` re-exports these classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


#: the rounds rule's defaults (``lab.evaluate.timing.alternate``): the deciding intervals'
#: target half-width as a fraction of the ratio (issue 25: ±5 %); the ratios whose
#: intervals decide unless the caller names others (a campaign adds its speed goal's
#: metric); the most rounds as a multiple of the least, unless the caller says otherwise
#: (5: the rounds after the least time the deciding ratios' clients alone, about half a
#: round's cost, so 12 + 48 cost less than 36 whole rounds did, and at the machine's noise
#: of round 13 they kept every half-width within ±5 %, where 36 did not:
#: docs/performance.md, round 13)
TARGET_HALF_WIDTH = 0.05
DECIDING_METRICS = ("first_backup_wall",)
CAP_FACTOR = 5

#: a round's invocations, in order (the unchanged one backs up what the first one did)
INVOCATIONS = ("first_backup", "unchanged")


def invocation_of(metric: str) -> str | None:
    """The invocation a timing metric is of ("unchanged_wall" -> "unchanged"); None for one
    of no single invocation."""
    return next((i for i in INVOCATIONS if metric in (f"{i}_wall", f"{i}_cpu")), None)


#: why a timing stopped adding rounds (``RoundsRule.stopped``)
STOP_REASONS = {
    "fixed": "a fixed number of rounds was asked for",
    "target": "every deciding interval was within the target",
    "cap": "the most rounds allowed ran before every deciding interval was within the target",
    "failed-round": "a round failed its check, so no ratio can be given whatever more rounds show",
    "undefined": "a deciding ratio is undefined, so more rounds cannot narrow it",
}


@dataclass(frozen=True, kw_only=True)
class RoundsRule:
    """How many rounds a timing ran and why it stopped: at least ``min_rounds``; then, in
    blocks, more until the 95 % interval of every ``metrics`` ratio is within
    ± ``target_half_width`` of it, or ``max_rounds`` have run (a fixed-width sequential
    interval, in the manner of Chow and Robbins, 1965: the rule looks only at the
    interval's width, never at where it lies, so it cannot steer the ratio)."""

    min_rounds: int
    max_rounds: int
    #: as a fraction of the ratio (0.05: ± 5 %)
    target_half_width: float
    #: the ratios whose intervals decide (first_backup_wall, and a speed goal's metric)
    metrics: tuple[str, ...]
    #: a key of ``STOP_REASONS``
    stopped: str
    #: each deciding metric's half-width at the stop (a fraction; None where undefined)
    half_widths: dict[str, float | None]
    #: what a round after the least timed: client -> its invocations ("first_backup",
    #: "unchanged"); a client not named was not run there. Empty in records made before
    #: (every round then timed every client's every invocation)
    later_rounds: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def later_ran(self, rounds: int) -> bool:
        """Whether rounds after the least ran, timing less than everything."""
        return rounds > self.min_rounds and bool(self.later_rounds)

    def least_only(self, rounds: int, client: str, metric: str) -> bool:
        """Whether ``client``'s ``metric`` was timed in the least rounds alone (the later
        rounds did not time it)."""
        return self.later_ran(rounds) and (
            invocation_of(metric) not in self.later_rounds.get(client, ())
        )

    def later_sentence(self, rounds: int) -> str:
        """E.g. "the 24 rounds after the first 12 timed only the first backup of the
        baseline and the candidate, what the deciding ratios need" ("" when every round
        timed everything)."""
        if not self.later_ran(rounds):
            return ""
        invocations = sorted({i for timed in self.later_rounds.values() for i in timed})
        what = " and ".join(i.replace("_", " ") for i in invocations)
        clients = " and ".join(f"the {name}" for name in self.later_rounds)
        return (
            f"the {rounds - self.min_rounds} rounds after the first {self.min_rounds} timed "
            f"only the {what} of {clients}, what the deciding ratios need"
        )

    def sentence(self, rounds: int) -> str:
        """E.g. "16 rounds (at least 12, at most 36, until every deciding 95 % interval is
        within ±5 %; stopped: every deciding interval was within the target;
        first_backup_wall ±3.9 %)"."""
        widths = ", ".join(
            f"{m} " + ("N/A" if w is None else f"±{100 * w:.1f} %")
            for m, w in self.half_widths.items()
        )
        if self.stopped == "fixed":
            return f"{rounds} rounds (a fixed number: {widths})"
        rule = (
            f"at least {self.min_rounds}, at most {self.max_rounds}, until every deciding 95 % "
            f"interval is within ±{100 * self.target_half_width:g} %"
        )
        later = self.later_sentence(rounds)
        return f"{rounds} rounds ({rule}; stopped: {STOP_REASONS[self.stopped]}; {widths}" + (
            f"; {later})" if later else ")"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_rounds": self.min_rounds,
            "max_rounds": self.max_rounds,
            "target_half_width": self.target_half_width,
            "metrics": list(self.metrics),
            "stopped": self.stopped,
            "half_widths": dict(self.half_widths),
            **(
                {"later_rounds": {n: list(t) for n, t in self.later_rounds.items()}}
                if self.later_rounds
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundsRule:
        return cls(
            min_rounds=int(data["min_rounds"]),
            max_rounds=int(data["max_rounds"]),
            target_half_width=float(data["target_half_width"]),
            metrics=tuple(str(m) for m in data["metrics"]),
            stopped=str(data["stopped"]),
            half_widths={str(m): _optional_float(w) for m, w in data["half_widths"].items()},
            later_rounds={
                str(n): tuple(str(i) for i in t)
                for n, t in (data.get("later_rounds") or {}).items()
            },
        )


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Untraced timing rounds (``lab.evaluate.timing.alternate``)."""

    rounds: int
    size: int
    method: str
    #: client name ("baseline", "candidate") -> its spreads
    clients: dict[str, ClientTiming]
    #: the median of the rounds' candidate ÷ baseline per metric (each round's two clients
    #: ran next to each other; ``first_backup_wall_above_floor``: of the medians' shares
    #: above the floor), stored when both clients ran; None for a metric where it is
    #: undefined
    ratio: dict[str, float | None] | None = None
    #: the 95 % confidence interval [low, high] of each ``ratio`` (None where undefined)
    ratio_interval: dict[str, list[float] | None] | None = None
    #: how ``ratio_interval`` was computed (``lab.evaluate.interval.METHOD``)
    interval_method: str | None = None
    #: the instrument floor's reference uploader (``lab.evaluate.floor``): its source and
    #: binary digests, or the reason it is missing; its spreads are ``clients["floor"]``
    floor: dict[str, str | None] | None = None
    #: how many rounds ran and why they stopped; None in records made before the rule
    rounds_rule: RoundsRule | None = None

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
        if self.rounds_rule is not None:
            row["rounds_rule"] = self.rounds_rule.to_dict()
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        ratio = data.get("ratio")
        floor = data.get("floor")
        bars = data.get("ratio_interval")
        rule = data.get("rounds_rule")
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
            rounds_rule=None if rule is None else RoundsRule.from_dict(rule),
        )
