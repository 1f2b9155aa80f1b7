"""``lab campaign`` handed to the lab image: the task file (a fixture task: its whole
directory, fixture and seeds with it) and every file the agent command names mounted
read-only at the same names inside, the environment the task forwards, the archive landing
in the host's ``--out``."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from lab.campaign.agent import MOUNTED, names_file
from lab.campaign.task import CampaignRequest
from lab.container import run as container
from lab.pipeline import REPO
from lab.workloads.task import is_fixture_task


def _mounted(command: str, mounts: list[tuple[Path, str]]) -> str:
    """``command`` with each file it names mounted read-only (added to ``mounts``)."""
    words = []
    for word in shlex.split(command):
        path = names_file(word, Path.cwd())
        if path is not None:
            inside = f"{MOUNTED}/{path.name}"
            if (path, inside) not in mounts:
                mounts.append((path, inside))
            word = inside
        words.append(word)
    return shlex.join(words)


def delegate(request: CampaignRequest) -> tuple[int, dict[str, Any] | None]:
    """Run this very campaign inside the lab image, with the task file and the files the
    agent command names mounted read-only; the archive lands in the host's --out. Its exit
    status, and with ``--json`` the document the lab in the image wrote."""
    mounts: list[tuple[Path, str]] = []
    task_host = request.task_path.resolve()
    task_inside = f"/lab/campaign-input/{task_host.name}"
    if is_fixture_task(task_host):  # its fixture/ and seeds/ lie beside it
        folder = f"/lab/campaign-input/{task_host.parent.name}"
        mounts.append((task_host.parent, folder))
        task_inside = f"{folder}/{task_host.name}"
    else:
        mounts.append((task_host, task_inside))
    moved = CampaignRequest(
        **{
            **request.__dict__,
            "agent_cmd": _mounted(request.agent_cmd, mounts),
            "escalate_cmd": None
            if request.escalate_cmd is None
            else _mounted(request.escalate_cmd, mounts),
        }
    )
    argv = moved.argv(task=task_inside, out=container.CONTAINER_ARTIFACTS)
    status, document = container.delegate(
        REPO,
        argv,
        out=request.out,
        json_document=request.json,
        mounts=tuple(mounts),
        forward_env=request.agent_env,
    )
    return status, document
