"""The two checks every ``from_dict`` of the model makes while reading ``results.json`` back:
an object where one is expected, a key that must be there. Each failure is a ``ValueError``
naming the key (``lab merge`` says it in one sentence).

``lab merge`` judges nothing again: ``RunResult.from_dict`` reads each verified shard's
records into the same dataclasses the runner built (each class reading its own record), so
the judges' aggregate code and the presenters work on them unchanged. What ``to_dict``
derives (``backup``, the merged ``invocations`` view, ``calibration``, ``tracing_overhead``,
``contract_violations``, ``verified``) is derived again, never read. The client's event lines
are not in ``results.json`` (only their count), so a claim read back holds ``event_count``
and no ``events``.

    scenario = mapping(document["scenarios"][0], "scenario")
    name = required(scenario, "name", "scenario")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} is not an object")
    return data


def required(data: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in data:
        raise ValueError(f"{what}.{key} is missing")
    return data[key]
