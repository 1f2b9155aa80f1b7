"""``python -m lab`` and the ``lab`` console script (:func:`main`): the PDF's drawer started
first for a command that draws one (``lab._start``, before the lab's other modules are
imported), then :func:`lab._cli.run`, which ends the process once ``lab._cli.main``
returns."""

import sys

from lab import _start


def main() -> None:
    """The ``lab`` program."""
    if _start.wants_drawer(sys.argv[1:]):
        _start.start_early()
    from lab._cli import run

    run()


if __name__ == "__main__":
    main()
