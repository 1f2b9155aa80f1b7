"""Shards: a deterministic partition of a run's work units over N machines.

A *unit* is one repetition of one scenario (``lab run``), of one condition
(``lab evaluate``) or of a campaign's agent (``lab campaign``). The units are sorted by name
and repetition and unit ``i`` (from 0) goes to shard ``i mod N + 1``: no hash, no
randomness, no clock, so every machine given the same inputs computes the same partition,
and neighbouring repetitions of a scenario land on different machines (a slow scenario does
not pile up on one shard).

    spec = ShardSpec.parse("2/3")
    units = work_units(["baseline", "hash-storm"], repetitions=3)   # 6 units, sorted
    spec.select(units)          # [Unit("baseline", 2), Unit("hash-storm", 2)]
    frozen = frozen_run_id({"scenarios": {...}, "repetitions": 3, ...})   # "run-1f0c…"
    shard_run_id(frozen, spec)  # "run-1f0c…-shard2of3": this shard's own run directory

Every shard of one run records the same *frozen* run id (``shard.run_id`` in
``results.json``): given with ``--run-id``, or derived from the inputs that decide what the
shards compute, so that ``lab merge`` can tell shards of one run from shards of another.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lab.errors import UsageError
from lab.model.records import ShardRecord

#: more shards than this is a configuration mistake, not a cluster
MAX_SHARDS = 1024
#: a run id names a directory and an archive: letters, digits, '.', '_' and '-'
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_SPEC = re.compile(r"(\d{1,5})/(\d{1,5})")


@dataclass(frozen=True, order=True)
class Unit:
    """One repetition (from 1) of one scenario or condition."""

    name: str
    repetition: int

    def to_dict(self, kind: str = "scenario") -> dict[str, Any]:
        return {kind: self.name, "repetition": self.repetition}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], kind: str = "scenario") -> Unit:
        name, rep = data.get(kind), data.get("repetition")
        if not isinstance(name, str) or not isinstance(rep, int) or isinstance(rep, bool):
            raise ValueError(f"not a work unit: {dict(data)!r}")
        return cls(name, rep)


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (1 … ``count``) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS:
            raise UsageError(f"--shard: the shard count must be 1 to {MAX_SHARDS}.")
        if not 1 <= self.index <= self.count:
            raise UsageError(
                f"--shard {self.index}/{self.count}: the index must be 1 to {self.count}."
            )

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """``"I/N"`` (1-based, as people count machines) into a spec, or a UsageError."""
        match = _SPEC.fullmatch(text.strip())
        if match is None:
            raise UsageError(f"--shard {text!r} is not I/N (for example 2/3).")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def from_completion_index(cls, index: int, count: int) -> ShardSpec:
        """A Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX`` (from 0) as a spec."""
        return cls(index + 1, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, units: Iterable[Unit]) -> list[Unit]:
        """This shard's units: every ``count``-th of the sorted units, from ``index - 1``."""
        ordered = sorted(set(units))
        if self.count > len(ordered):
            raise UsageError(
                f"--shard {self}: {self.count} shards for {len(ordered)} work unit(s) would "
                f"leave a shard with nothing to do; use at most {len(ordered)} shards."
            )
        return ordered[self.index - 1 :: self.count]


def work_units(names: Iterable[str], repetitions: int) -> list[Unit]:
    """Every (name, repetition) of a run, sorted."""
    return sorted({Unit(name, rep) for name in names for rep in range(1, repetitions + 1)})


def partition(units: Iterable[Unit], count: int) -> list[list[Unit]]:
    """All ``count`` shards' units, shard 1 first."""
    listed = list(units)
    return [ShardSpec(i, count).select(listed) for i in range(1, count + 1)]


def check_run_id(text: str) -> str:
    if RUN_ID.fullmatch(text) is None:
        raise UsageError(
            f"--run-id {text!r} is not a run id: use 1 to 80 letters, digits, '.', '_' or "
            "'-', starting with a letter or digit."
        )
    return text


def frozen_run_id(inputs: Mapping[str, Any], prefix: str = "run") -> str:
    """A run id that every shard derives alike from the same inputs: the SHA-256 of their
    canonical JSON (sorted keys, no spaces), shortened. ``inputs`` must hold only what is the
    same on every machine (names, file digests, options, the lab's version), never a host
    name, a path or a time."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return f"{prefix}-{hashlib.sha256(text.encode('ascii')).hexdigest()[:16]}"


def shard_run_id(frozen: str, spec: ShardSpec) -> str:
    """This shard's own run directory and archive name."""
    return f"{frozen}-shard{spec.index}of{spec.count}"


def shard_record(spec: ShardSpec, units: Iterable[Unit], frozen: str, kind: str) -> ShardRecord:
    """``results.json`` → ``shard``: which shard this is, its units, the shared run id."""
    return {
        "index": spec.index,
        "count": spec.count,
        "run_id": frozen,
        "unit": kind,
        "units": [u.to_dict(kind) for u in sorted(units)],
    }
