"""``python -m lab`` as a separate process, as another machine (or a shard) would run it.

done = lab(["evaluate", "--binary", str(client), "--shard", "1/2"], env)
done.returncode, done.stdout
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def lab(
    args: list[str], env: dict[str, str], cwd: Path = ROOT, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    """Run the lab with ``args``; ``cwd`` other than the repository needs PYTHONPATH in
    ``env`` to find this lab rather than an installed one."""
    return subprocess.run(
        [sys.executable, "-m", "lab", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
