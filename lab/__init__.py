"""Execution Evidence Lab: run a native backup client through seeded scenarios, observe it
from outside its own logging, judge it against an explicit contract, and publish signed
evidence archives.

    $ python -m lab run --all --collector none --packets off --out artifacts
"""

__version__ = "0.1.0"
