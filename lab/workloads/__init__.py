"""The workloads the lab can judge, each a package beside the others, and the one seam the
generic stages reach them through: ``workload(name)`` returns a :class:`Workload`, whose
``judge`` turns one scenario's observed passes into verdicts and findings.

    backup = workload("backup")
    backup.judge(result, chosen_scenario, size=backup.default_size)

``WORKLOADS`` names each workload's module (imported when asked for, so a workload is only
loaded by a run that uses it). Nothing in the sandbox, the collectors, the judge machinery,
the reports or the evidence imports a workload's package (``tests/unit/test_layout.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

from lab.model import ScenarioResult

#: workload name -> the module that defines its ``WORKLOAD``
WORKLOADS: dict[str, str] = {
    "backup": "lab.workloads.backup.workload",
}


class Workload(Protocol):
    """What the pipeline needs of a workload."""

    #: the workload's name (``WORKLOADS``' key)
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


def workload(name: str) -> Workload:
    """The workload called ``name``; ``KeyError`` when there is none."""
    found: Workload = importlib.import_module(WORKLOADS[name]).WORKLOAD
    return found
