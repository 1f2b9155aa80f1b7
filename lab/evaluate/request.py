"""What ``python -m lab evaluate`` was asked to do: one typed, frozen value that the CLI
builds from its arguments and :func:`lab.evaluate.judge.execute` carries out.

    request = EvaluationRequest(kind="patch", path=Path("agent.patch"), repetitions=3)
    outcome = execute(request, say=print)               # lab.evaluate.judge
    request.options("evaluate", ["baseline"])          # results.json's options record
    request.argv(candidate="/lab/candidate/agent.patch", out="/lab/artifacts")
    # ["evaluate", "--patch", "/lab/candidate/agent.patch", "--repetitions", "3", ...]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.errors import UsageError
from lab.model.timing import CAP_FACTOR, DECIDING_METRICS
from lab.run.options import check_count
from lab.run.shard import ShardSpec
from lab.workloads.backup.fixture import DEFAULT_SIZE

if TYPE_CHECKING:  # the evaluation model is imported where an evaluation is made
    from lab.model.evaluation import CandidateKind

#: ``lab evaluate``'s per-invocation limit, seconds. A correct client backs up the default
#: 512 KiB in about 20 ms here, so 15 s is some 700 times that; a candidate that never exits
#: costs one limit per condition, at most ``--jobs`` of them at once (4 conditions: two
#: limits, about 30 s, where 30 s a limit cost 126 s measured on this machine)
DEFAULT_TIMEOUT_S = 15.0

#: the ``python -m lab evaluate`` option naming each kind of candidate
KIND_FLAGS: dict[CandidateKind, str] = {
    "patch": "--patch",
    "source-dir": "--source-dir",
    "binary": "--binary",
}


@dataclass(frozen=True, kw_only=True)
class EvaluationRequest:
    """One candidate evaluation: the candidate, how often to judge and time it, with which
    collectors, and where the run directory goes."""

    kind: CandidateKind
    #: the candidate as the user named it (a patch file, a source directory, a binary)
    path: Path
    #: repetitions of every contract condition
    repetitions: int = 3
    #: untraced timing rounds, candidate and baseline alternated: at least this many
    timing_runs: int = 12
    #: and at most this many (None: ``CAP_FACTOR`` times ``timing_runs``), added until every
    #: deciding interval is within ±5 % (``lab.evaluate.timing``)
    timing_max_runs: int | None = None
    #: the ratios whose intervals decide when the rounds stop (a campaign adds its speed
    #: goal's metric)
    timing_metrics: tuple[str, ...] = DECIDING_METRICS
    collector: str = "all"
    packets: str = "best-effort"
    size: int = DEFAULT_SIZE
    #: per-invocation limit, seconds
    timeout_s: float = DEFAULT_TIMEOUT_S
    out: Path = Path("artifacts")
    #: build and judge on this host rather than in the lab image
    local: bool = False
    #: ``--json``: in the lab image too, so that its document comes back
    json: bool = False
    #: judge only this shard's condition × repetition units (``--shard I/N``,
    #: :mod:`lab.evaluate.shard`)
    shard: ShardSpec | None = None
    #: the run id; with ``shard``, the id every shard shares (derived when None)
    run_id: str | None = None
    #: ``--recalibrate``: run the instrument check even when one kept under ``out`` matches
    #: every input (``lab.evaluate.instrument``)
    recalibrate: bool = False
    #: ``--jobs N``: judged passes of one phase at once (None: lab.run.schedule's default);
    #: not part of what is judged, so not in the frozen evaluation
    jobs: int | None = None

    @property
    def timing_cap(self) -> int:
        """The most timing rounds: ``timing_max_runs``, or ``CAP_FACTOR`` × the least."""
        if self.timing_max_runs is None:
            return CAP_FACTOR * self.timing_runs
        return self.timing_max_runs

    def check_timing(self) -> None:
        """A UsageError naming the option when the timing rounds asked for cannot be run."""
        check_count(self.timing_runs, "--timing-runs")
        check_count(self.timing_cap, "--timing-max-runs")
        if self.timing_max_runs is not None and self.timing_max_runs < self.timing_runs:
            raise UsageError(
                f"--timing-max-runs {self.timing_max_runs} must be at least --timing-runs "
                f"({self.timing_runs}); give the same number for exactly that many rounds."
            )

    @property
    def flag(self) -> str:
        return KIND_FLAGS[self.kind]

    def options(self, mode: str, scenarios: list[str]) -> dict[str, Any]:
        """What ``results.json`` records as the run's options (an evaluation's, or a
        campaign's, which adds its own)."""
        return {
            "mode": mode,
            "scenarios": scenarios,
            "collector": self.collector,
            "packets": self.packets,
            "repetitions": self.repetitions,
            "size": self.size,
            "client_kind": "candidate",
            "timeout_s": self.timeout_s,
        }

    def argv(self, *, candidate: str, out: str) -> list[str]:
        """The ``python -m lab`` arguments asking for this same evaluation elsewhere (in the
        lab image), with the candidate and the output directory as that side sees them."""
        return [
            "evaluate", self.flag, candidate,
            "--repetitions", str(self.repetitions),
            "--timing-runs", str(self.timing_runs),
            "--collector", self.collector,
            "--packets", self.packets,
            "--size", str(self.size),
            "--timeout", str(self.timeout_s),
            "--out", out,
            *(["--timing-max-runs", str(self.timing_max_runs)] if self.timing_max_runs else []),
            *(["--json"] if self.json else []),
            *(["--shard", str(self.shard)] if self.shard is not None else []),
            *(["--run-id", self.run_id] if self.run_id else []),
            *(["--jobs", str(self.jobs)] if self.jobs is not None else []),
            *(["--recalibrate"] if self.recalibrate else []),
        ]  # fmt: skip
