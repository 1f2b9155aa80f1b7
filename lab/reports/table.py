"""The shared cell vocabulary of the reports: :class:`Table` (a header, rows of strings,
notes) and the ``fmt*`` functions that turn one figure into one cell.

    fmt(524288)          # "524,288"
    fmt(None)            # "not recorded": a missing figure is never drawn as a zero
    fmt_field("receiver_port", 36481)  # "36481": a port or an id is not a quantity
    fmt_seconds(0.0141)  # "14.1 ms"
    fmt_ratio(None)      # "N/A"
    sentence("... (tcpdump).")  # one full stop, never two
    Table(["clause", "observed"], [["C1", "pass"]], notes=["..."])

Every module beside this one (``run``, ``scenario``, ``observers``, ``repetitions``,
``evaluation``, ``files``) returns these rows and strings, so the Markdown and PDF views say
the same thing; the presenters only decide how to draw them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lab.model.timing import Spread

NOT_RECORDED = "not recorded"
NOT_OBSERVED = "not observed"


@dataclass
class Table:
    """A header and rows of plain strings; ``notes`` are sentences drawn under the table."""

    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


def fmt(value: Any) -> str:
    """One cell: thousands separators for integers, "not recorded" for None."""
    if value is None:
        return NOT_RECORDED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, str):
        return mask_host_path(value)
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value) if value else "none"
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, separators=(", ", ": "), default=str)
    return str(value)


#: words of a field name that make its integers identifiers (a port, a process id, a
#: seed), never quantities: "36481", not "36,481"
IDENTIFIER_WORDS = frozenset(
    ("port", "ports", "pid", "pids", "id", "ids", "uid", "gid", "inode", "seed", "fd", "index")
)


def is_identifier(key: str) -> bool:
    words = key.lower().replace("-", " ").replace("_", " ").replace(":", " ").split()
    return any(word in IDENTIFIER_WORDS for word in words)


def fmt_id(value: Any) -> str:
    """An identifier: integers as typed (no thousands separator), lists joined."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list | tuple):
        return ", ".join(fmt_id(v) for v in value) if value else "none"
    return fmt(value)


def fmt_field(key: str, value: Any) -> str:
    """The value of field ``key``: an identifier (:func:`is_identifier`) without thousands
    separators, anything else as :func:`fmt` draws it."""
    return fmt_id(value) if is_identifier(key) else fmt(value)


def fmt_summary(key: str, value: Any) -> str:
    """A collector summary value: epoch timestamps (keys ending ``_at``) as UTC time, ports
    and ids as identifiers."""
    if key.endswith("_at") and isinstance(value, int | float) and not isinstance(value, bool):
        when = datetime.fromtimestamp(float(value), tz=UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    return fmt_field(key, value)


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return NOT_RECORDED
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return f"{value:.3f} s"


def fmt_ratio(value: float | None) -> str:
    """A ratio such as traced/untraced time; "N/A" where it is undefined."""
    return "N/A" if value is None else f"{value:.2f}x"


def fmt_spread(stats: Spread | None) -> str:
    """Median (min - max) of a timing, one figure when they coincide; "not recorded" for
    None."""
    if stats is None:
        return NOT_RECORDED
    if stats.min == stats.max:
        return fmt_seconds(stats.median)
    return f"{fmt_seconds(stats.median)} ({fmt_seconds(stats.min)} - {fmt_seconds(stats.max)})"


def sentence(text: str) -> str:
    """``text`` ending in exactly one full stop: a reason that already ends in one (or in a
    question or exclamation mark) keeps it, so no sentence ends "(tcpdump).."."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def phrase(text: str) -> str:
    """``text`` without its closing full stop, to be joined into a longer sentence."""
    text = text.rstrip()
    while text.endswith(".") and not text.endswith("..."):
        text = text[:-1].rstrip()
    return text


def mask_host_path(value: str) -> str:
    """Reports carry no host paths: an absolute path is cut down to its last component."""
    if value.startswith("/") and " " not in value and len(value) > 1:
        return ".../" + value.rstrip("/").rsplit("/", 1)[-1]
    return value
