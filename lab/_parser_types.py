"""The command line's value types and shared options: sizes with units, positive counts,
``--shard I/N`` with ``--run-id``, and the completion hint a path option carries. Used by
:mod:`lab._parser`'s subcommands."""

from __future__ import annotations

import argparse
import os
import sys

from lab.errors import LabError
from lab.run.shard import ShardSpec

#: shtab's completers for paths (the strings it documents as shtab.FILE and shtab.DIRECTORY)
_FILE = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}
_DIRECTORY = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/", "tcsh": "d"}


def prog_name(argv0: str | None = None) -> str:
    """How the user invoked the lab: ``python -m lab`` (``lab/__main__.py``), or the name
    of the console script (``lab``, or whatever a wrapper was called)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = os.path.basename(argv0)
    if not name or name in ("__main__.py", "-c") or name.endswith(".py"):
        return "python -m lab"
    return name


def size_value(text: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    mult = units.get(t[-1:], 1)
    if t[-1:] in units:
        t = t[:-1]
    try:
        value = int(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size (e.g. 524288, 512K, 8M)"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError("size must be at least 1 byte")
    return value


def positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _shard(text: str) -> ShardSpec:
    try:
        return ShardSpec.parse(text)
    except LabError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_shard(parser: argparse.ArgumentParser, units: str) -> None:
    """``--shard I/N`` and ``--run-id``, alike on every command that can be sharded."""
    parser.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="I/N",
        help=f"run only shard I of N of the {units} units (merge the N signed archives "
        "with 'lab merge')",
    )
    parser.add_argument(
        "--run-id",
        default=None,
        help="the run id (with --shard: the id every shard shares; default: derived from the "
        "inputs, the same on every machine)",
    )


def complete_path(action: argparse.Action, *, directory: bool = False) -> None:
    """Tell the completion script that this option takes a file (or a directory)."""
    action.complete = _DIRECTORY if directory else _FILE  # type: ignore[attr-defined]
