"""``python -m lab``: the command line, :func:`lab._cli.main`."""

from lab._cli import main

raise SystemExit(main())
