"""What one run is asked to execute: the scenarios, the passes (``none`` first, then one per
process collector), the packet mode, repetitions, fixture size, the client and its kind.
``lab.pipeline`` (and ``lab.evaluate``) build it; ``lab.run.runner`` executes it.

    plan = Plan(scenarios=[scenario.load(path)], passes=["none", "strace"],
                packets="best-effort", repetitions=3, client=Path("native/backup-client"))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.workloads.backup import fixture
from lab.workloads.backup.scenario import Scenario


@dataclass
class Plan:
    scenarios: list[Scenario]
    #: "none" first, then the process collectors to run, each in its own pass
    passes: list[str]
    packets: str  # "off" | "best-effort" | "required"
    repetitions: int = 1
    size: int = fixture.DEFAULT_SIZE
    client: Path = Path("native/backup-client")
    #: "seeded": pass --behavior from the scenario; "candidate": client contract v1 only
    client_kind: str = "seeded"
    timeout_s: float = 120.0
    #: collectors that were asked for but cannot run, with the reason
    unavailable: dict[str, str] = field(default_factory=dict)
    seed: str = "lab"
    #: run only these (scenario, repetition) units, in this order (a shard: lab.run.shard);
    #: None runs every scenario × repetition
    units: list[tuple[str, int]] | None = None
    #: untraced passes run at once (lab.run.schedule decides it; 1: strictly sequential)
    jobs: int = 1
    #: the workload whose judge judges the results (``lab.workloads.WORKLOADS``)
    workload: str = "backup"
