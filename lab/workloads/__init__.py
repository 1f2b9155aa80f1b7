"""Workloads: what the lab judges, each a package beside the others (``backup``: a client
backing up a file to the lab's receiver, judged against C1-C6; ``safestore``: the second
article's Go ``Store.Write``). A workload is a fixture, how a candidate of it is built
and run, its clauses, and the oracle that decides them; everything else (sandbox, observers,
repetitions, the four verdicts, archives, campaigns) is shared machinery that knows none.

    workload = get("safestore")                  # TaskError naming the known ones
    judgement = workload.oracle()(tree, fixture=..., out=..., editable=..., protected=...,
                                  gocache=..., attempts=None, timeout_s=60.0)
    judgement.clauses["S3"].verdict              # "pass" | "fail" | "not-observed"

The backup client is the first workload, registered by reference: its scenarios, contract
(C1-C6, :mod:`lab.workloads.backup.contract`) and evaluation (:mod:`lab.evaluate`) are the run
pipeline's own, reached through ``campaigns/speedup.yaml``-style tasks. A fixture task
(``campaigns/*/task.yaml``, :mod:`lab.workloads.task`) names a workload whose oracle
decides the clauses its verification commands cannot. The oracle is imported only when a
task asks for it, so a workload's code never loads with the lab.

One registry serves both ways in: a scenario workload (the backup client) also names the
object the run pipeline judges its scenarios with, reached through ``workload(name)``:

    backup = workload("backup")                  # a ScenarioWorkload
    backup.judge(result, chosen_scenario, size=backup.default_size)

Nothing in the sandbox, the collectors, the judge machinery, the reports or the evidence
imports a workload's package (``tests/unit/test_layout.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from lab.errors import TaskError
from lab.model import ScenarioResult

Verdict = Literal["pass", "fail", "not-observed"]


class ClauseLike(Protocol):
    """One clause's verdict from an oracle (``ClauseResult`` of a workload)."""

    @property
    def verdict(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def evidence(self) -> tuple[str, ...]: ...


class OracleJudgement(Protocol):
    """What an oracle returns: a verdict per clause it decides, and its figures."""

    @property
    def clauses(self) -> Mapping[str, ClauseLike]: ...

    def to_dict(self) -> dict[str, Any]: ...


Oracle = Callable[..., OracleJudgement]


class ScenarioWorkload(Protocol):
    """What the run pipeline needs of a workload judged by scenarios (the backup client)."""

    #: the workload's name (its registry key)
    name: str
    #: the default size of the data a scenario works on, in bytes
    default_size: int

    def scenarios_dir(self, repo: Path) -> Path:
        """Where the workload's scenario files are, in a checkout rooted at ``repo``."""
        ...

    def select(self, directory: Path, names: list[str], everything: bool) -> list[Any]:
        """The named scenarios (or every one) loaded from ``directory``, in the order given."""
        ...

    def judge(self, result: ScenarioResult, chosen: Any, *, size: int) -> None:
        """Set ``result.verdicts`` and ``result.findings`` from its passes' observations."""
        ...


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    #: the modules (and files) that make it up, for docs and provenance
    modules: tuple[str, ...]
    #: ``module:function`` of its fixture-task oracle; None when its clauses are decided
    #: elsewhere (the backup workload's by the run pipeline's contract)
    oracle_ref: str | None = None
    #: the clause ids the oracle decides
    oracle_clauses: tuple[str, ...] = ()
    #: the module whose ``WORKLOAD`` the run pipeline judges scenarios with; None for a
    #: workload judged only as a fixture task
    scenarios_module: str | None = None

    def oracle(self) -> Oracle:
        if self.oracle_ref is None:
            raise TaskError(
                f"the workload {self.name!r} has no fixture-task oracle; give its clauses a "
                "verification command instead."
            )
        module_name, _, attr = self.oracle_ref.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise TaskError(
                f"the workload {self.name!r}'s oracle ({module_name}) cannot be imported "
                f"({error}); this checkout lacks it."
            ) from None
        found: Oracle = getattr(module, attr)
        return found


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> None:
    """Add (or replace) a workload; tests register small ones of their own."""
    _REGISTRY[workload.name] = workload


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def get(name: str) -> Workload:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise TaskError(
            f"no workload is registered as {name!r}; known: {', '.join(sorted(_REGISTRY))}."
        ) from None


def workload(name: str) -> ScenarioWorkload:
    """The scenario workload called ``name`` (the run pipeline's seam); ``KeyError`` when no
    registered workload of that name is judged by scenarios."""
    module = _REGISTRY[name].scenarios_module if name in _REGISTRY else None
    if module is None:
        raise KeyError(name)
    found: ScenarioWorkload = importlib.import_module(module).WORKLOAD
    return found


def names() -> Sequence[str]:
    return sorted(_REGISTRY)


def judge_with(
    workload: Workload, tree: Path, *, fixture: Path, out: Path, options: Mapping[str, Any]
) -> OracleJudgement:
    """Call the workload's oracle on ``tree`` with the interface every oracle has."""
    return workload.oracle()(tree, fixture=fixture, out=out, **options)


register(
    Workload(
        name="backup",
        description="the native backup client (native/) against contract C1-C6 "
        "(docs/client-contract.md), judged by the run pipeline's scenarios",
        modules=("native/", "lab.workloads.backup", "lab.run", "lab.evaluate", "scenarios/"),
        scenarios_module="lab.workloads.backup.workload",
    )
)
register(
    Workload(
        name="safestore",
        description="the second article's Go Store.Write (campaigns/safe-store/): S3 contained "
        "under hostile names and a racing attacker, S4 legitimate names land, S5 scope",
        modules=("lab.workloads.safestore", "campaigns/safe-store/"),
        oracle_ref="lab.workloads.safestore.oracle:judge_candidate",
        oracle_clauses=("S3", "S4", "S5"),
    )
)
register(
    Workload(
        name="none",
        description="no oracle: every clause of the task comes from a verification command",
        modules=(),
    )
)
