"""The typed readers every observer summary's ``from_dict()`` shares: a required integer, an
optional one, floats, string tuples and count maps, each a ``ValueError``/``TypeError`` naming
the key when a document holds something else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def required_int(data: Mapping[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"observed '{key}' is not an integer: {value!r}")
    return value


def optional_int(data: Mapping[str, Any], key: str) -> int | None:
    return None if data.get(key) is None else required_int(data, key)


def optional_float(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"observed '{key}' is not a number: {value!r}")
    return float(value) if isinstance(value, float) else value


def required_float(data: Mapping[str, Any], key: str) -> float:
    value = optional_float(data, key)
    if value is None:
        raise ValueError(f"observed '{key}' is missing")
    return value


def str_tuple(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v) for v in data.get(key) or ())


def count_map(data: Mapping[str, Any], key: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in (data.get(key) or {}).items()}
