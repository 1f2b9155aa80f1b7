"""The rows of a CPU chart: one invocation's ``observed.perf.top_symbols`` ordered for a
reader, the client's own functions first and the addresses perf could not name folded into
one "[unresolved] <dso>" row per object.

    bars = symbol_bars(inv["observed"]["perf"], client="backup-client")
    [b.label for b in bars]   # ["hash_file", "main", "SHA256_Update (libcrypto.so.3)", ...,
                              #  "[unresolved] libcrypto.so.3"]

A row of perf's report that is a bare address (``0x00007f…``) or ``[unknown]`` says where a
sample fell, not what ran there; fifteen such rows of libcrypto and libc would otherwise
crowd the client's own functions out of the chart. Pure functions of the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: what perf prints for a sample it could not name: a bare address, or "[unknown]"
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
UNRESOLVED = "[unresolved]"


def is_unresolved(symbol: str) -> bool:
    return symbol == "[unknown]" or _ADDRESS.fullmatch(symbol) is not None


@dataclass(frozen=True)
class SymbolBar:
    """One bar of a CPU chart: a symbol of one DSO, or a DSO's unresolved addresses folded."""

    label: str
    dso: str
    #: one of the client's own functions (drawn first, in bold)
    own: bool
    unresolved: bool
    inclusive_pct: float | None
    self_pct: float | None


def client_dsos(perf: dict[str, Any], client: str | None = None) -> set[str]:
    """The DSO names perf gave the client binary: the recorded client name, the DSO of the
    collector's ``top_client_symbol`` (chosen among the client's own functions) and of
    ``main``."""
    names = {client} if client else set()
    top = perf.get("top_client_symbol")
    for sym in perf.get("top_symbols") or []:
        if not isinstance(sym, dict):
            continue
        if sym.get("symbol") in (top, "main") and isinstance(sym.get("dso"), str):
            names.add(sym["dso"])
    return names


def symbol_bars(perf: dict[str, Any], client: str | None = None) -> list[SymbolBar]:
    """One invocation's ``top_symbols`` as chart rows: the client's own functions first, then
    the other named symbols, then one "[unresolved] <dso>" row per DSO whose samples perf
    could not name (hex addresses, "[unknown]"), each group by inclusive share.

    A folded row's self share is the sum of its addresses' (each sample has one self
    address); its inclusive share is the largest of theirs, since their call chains overlap
    (perf lists one address both DSO-relative and absolute) and a sum would count samples
    twice.
    """
    own_dsos = client_dsos(perf, client)
    named: list[SymbolBar] = []
    folded: dict[str, tuple[float | None, float | None]] = {}
    for sym in perf.get("top_symbols") or []:
        if not isinstance(sym, dict):
            continue
        name, dso = str(sym.get("symbol", "?")), str(sym.get("dso", "?"))
        inclusive, self_pct = _num(sym.get("inclusive_pct")), _num(sym.get("self_pct"))
        if is_unresolved(name):
            was_inc, was_self = folded.get(dso, (None, None))
            folded[dso] = (_max(was_inc, inclusive), _sum(was_self, self_pct))
            continue
        own = dso in own_dsos
        label = name if own else f"{name} ({dso})"
        named.append(SymbolBar(label, dso, own, False, inclusive, self_pct))
    unresolved = [
        SymbolBar(f"{UNRESOLVED} {dso}", dso, dso in own_dsos, True, inc, slf)
        for dso, (inc, slf) in folded.items()
    ]

    def rank(bar: SymbolBar) -> tuple[float, float, str]:
        return (-(bar.inclusive_pct or 0.0), -(bar.self_pct or 0.0), bar.label)

    return (
        sorted((b for b in named if b.own), key=rank)
        + sorted((b for b in named if not b.own), key=rank)
        + sorted(unresolved, key=rank)
    )


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else (a if b is None else max(a, b))


def _sum(a: float | None, b: float | None) -> float | None:
    return b if a is None else (a if b is None else round(a + b, 2))


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
