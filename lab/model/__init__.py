"""The results model, one package: what a run observed and how it was judged. No I/O and no
stage lives here; every module of it imports only the model itself.

    from lab.model import RunResult, ScenarioResult, Pass, Invocation

| module | holds |
| --- | --- |
| ``run`` | ``RunResult``, ``ScenarioResult``, verdicts, findings, calibration, overhead |
| ``invocation`` | one pass and its invocations, the sandbox record |
| ``endpoints`` | the client's claim, the receiver's and decoy's summaries, the verifier's check |
| ``records`` | run-level objects, typed: shard, concurrency, incomplete, signing |
| ``read`` | the checks every ``from_dict`` makes reading ``results.json`` back |
| ``observed`` | each observer's per-invocation summary |
| ``aggregate`` | a scenario's repetitions aggregated |
| ``evaluation`` | a candidate evaluation's record |
| ``campaign`` | an agent campaign's record |
| ``sandbox`` | what the sandbox reports of one invocation's cgroup and lingering processes |
| ``safestore`` | the safe-store oracle's judgement of one candidate (S3–S5 and figures) |

``RunResult.to_dict()`` is exactly what goes into ``results.json``.
"""

from __future__ import annotations

from lab.model.endpoints import ClientClaim, DecoySummary, ReceiverSummary, VerifierCheck
from lab.model.invocation import (
    Invocation,
    Lingering,
    Pass,
    SandboxRecord,
    SharedSession,
)
from lab.model.observed import (
    BpftraceSummary,
    Observed,
    PacketFlow,
    PacketSummary,
    PerfSummary,
    PerfSymbol,
    StraceSummary,
)
from lab.model.run import (
    OBSERVERS,
    SCHEMA_VERSION,
    ObserverStatus,
    Overhead,
    RunResult,
    ScenarioResult,
)
from lab.model.verdicts import (
    CLAUSE_TITLES,
    CLAUSES,
    OUTCOMES,
    Calibration,
    Finding,
    Outcome,
    Verdict,
)
from lab.registry import PROCESS_COLLECTORS

__all__ = [
    "CLAUSES",
    "CLAUSE_TITLES",
    "OBSERVERS",
    "OUTCOMES",
    "PROCESS_COLLECTORS",
    "SCHEMA_VERSION",
    "BpftraceSummary",
    "Calibration",
    "ClientClaim",
    "DecoySummary",
    "Finding",
    "Invocation",
    "Lingering",
    "Observed",
    "ObserverStatus",
    "Outcome",
    "Overhead",
    "PacketFlow",
    "PacketSummary",
    "Pass",
    "PerfSummary",
    "PerfSymbol",
    "ReceiverSummary",
    "RunResult",
    "SandboxRecord",
    "ScenarioResult",
    "SharedSession",
    "StraceSummary",
    "Verdict",
    "VerifierCheck",
]
