"""The options of ``lab run`` and ``lab evaluate``, checked before anything is written.

    check_run_options(repetitions=1, size=524288, timeout_s=120.0, out=Path("artifacts"),
                      client=Path("native/backup-client"))   # UsageError / ClientError

Every refusal is one sentence naming the option; a refused run leaves no file behind
(the scenarios are checked by ``lab.workloads.backup.scenario`` before this, also without writing).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from lab.errors import ClientError, UsageError
from lab.host.writable import check_writable_dir
from lab.workloads.backup.protocol import DEFAULT_MAX_SIZE

#: a day: an invocation that needs longer is a hang, and ``inf`` would never time out
MAX_TIMEOUT_S = 86_400.0
#: repetitions (and timing rounds) a run may ask for; each is a fresh pass per scenario
MAX_REPETITIONS = 1000
#: the source must fit what the receiver accepts, or every upload is refused as too-large
MAX_SIZE = DEFAULT_MAX_SIZE
#: what an executable the kernel can run starts with: an ELF header or a ``#!`` line
_EXECUTABLE_MAGIC = (b"\x7fELF", b"#!")


def check_timeout(value: float, option: str = "--timeout") -> None:
    if not math.isfinite(value) or value <= 0 or value > MAX_TIMEOUT_S:
        raise UsageError(
            f"{option} {value} is not a number of seconds between 0 and {MAX_TIMEOUT_S:g}; "
            "give e.g. 120."
        )


def check_count(value: int, option: str, maximum: int = MAX_REPETITIONS) -> None:
    if not 1 <= value <= maximum:
        raise UsageError(f"{option} {value} must be between 1 and {maximum}.")


def check_size(value: int) -> None:
    if not 1 <= value <= MAX_SIZE:
        raise UsageError(
            f"--size {value} must be between 1 byte and {MAX_SIZE:,} bytes (the receiver's "
            "maximum upload)."
        )


def check_client(client: Path) -> None:
    """The client must be an executable program (checked by its first bytes, not by running)."""
    if not client.is_file():
        raise ClientError(
            f"{client}: the client binary does not exist; build it with 'make -C native'."
        )
    if not os.access(client, os.X_OK):
        raise ClientError(f"{client}: the client is not executable; give an executable program.")
    try:
        with open(client, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise ClientError(f"{client}: the client cannot be read ({exc.strerror}).") from None
    if not head.startswith(_EXECUTABLE_MAGIC):
        raise ClientError(
            f"{client}: the client is not a program (no ELF header or '#!' line); give the "
            "compiled client."
        )


def check_run_options(
    *, repetitions: int, size: int, timeout_s: float, out: Path, client: Path | None
) -> None:
    """Check what ``lab run`` / ``lab evaluate`` were given; ``client`` None: built later."""
    check_count(repetitions, "--repetitions")
    check_size(size)
    check_timeout(timeout_s)
    check_writable_dir(out, option="--out")
    if client is not None:
        check_client(client)
