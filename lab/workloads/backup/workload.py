"""The backup workload as the pipeline sees it (``lab.workloads.workload("backup")``): its
scenario files, its default source size, and its judge — the C1–C6 contract and the
scenarios' calibration expectations.

    WORKLOAD.judge(result, chosen, size=WORKLOAD.default_size)
"""

from __future__ import annotations

from pathlib import Path

from lab import resources
from lab.model import ScenarioResult
from lab.workloads.backup import calibration, contract, scenario
from lab.workloads.backup.fixture import DEFAULT_SIZE


class BackupWorkload:
    name = "backup"
    default_size = DEFAULT_SIZE

    def scenarios_dir(self, repo: Path) -> Path:
        # the checkout's scenarios/, or the installed copy (lab/resources.py)
        return resources.scenarios_dir() if repo == resources.package_root() else repo / "scenarios"

    def select(
        self, directory: Path, names: list[str], everything: bool
    ) -> list[scenario.Scenario]:
        return scenario.select(directory, names, everything)

    def judge(self, result: ScenarioResult, chosen: scenario.Scenario, *, size: int) -> None:
        result.verdicts = contract.judge(
            result, expected=chosen.expect.verdicts, faults_configured=bool(chosen.faults)
        )
        result.findings = calibration.evaluate(chosen, result, size=size)


WORKLOAD = BackupWorkload()
