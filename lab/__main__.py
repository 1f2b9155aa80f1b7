"""``python -m lab``: the command line, :func:`lab._cli.main` (through ``run``, which ends the
process once it returns)."""

from lab._cli import run

run()
