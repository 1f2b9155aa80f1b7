"""The pipeline every command goes through: plan → execute → judge → report → seal.

``lab run`` (:func:`execute`), ``lab evaluate`` (``lab.evaluate.judge``), ``lab campaign``
(``lab.campaign.conduct``) and ``lab merge`` (``lab.merge.combine``) call these and nothing
else of each other:

| stage | call |
| --- | --- |
| plan | ``setup`` (observers, passes, signer), ``open_run`` (directory, sandbox), ``new_run_id`` |
| execute | ``run_plan`` (the runner, pass by pass), which then judges |
| judge | ``judge_scenario`` (the workload's contract, calibration), ``make_result`` (aggregates) |
| report | ``report`` (``results.json``, ``report.md``, ``report.pdf``) |
| seal | ``seal`` (checksums, signatures, provenance, archive); ``finish`` = report + seal |

    outcome = execute(RunRequest(names=["baseline"]), say=print)
"""

from __future__ import annotations

from lab.pipeline.drawing import Drawer, drawer, warm_imports
from lab.pipeline.prepare import (
    COLLECTOR_CHOICES,
    PACKET_CHOICES,
    SANDBOX_CHOICES,
    Setup,
    new_run_id,
    open_run,
    setup,
)
from lab.pipeline.run import RunOutcome, RunRequest, execute
from lab.pipeline.stages import (
    REPO,
    archived_files,
    finish,
    judge_scenario,
    make_result,
    report,
    run_plan,
    seal,
    write_results,
)

__all__ = [
    "COLLECTOR_CHOICES",
    "PACKET_CHOICES",
    "REPO",
    "SANDBOX_CHOICES",
    "Drawer",
    "RunOutcome",
    "RunRequest",
    "Setup",
    "archived_files",
    "drawer",
    "execute",
    "finish",
    "judge_scenario",
    "make_result",
    "new_run_id",
    "open_run",
    "report",
    "run_plan",
    "seal",
    "setup",
    "warm_imports",
    "write_results",
]
