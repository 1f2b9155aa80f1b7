"""The rows of a CPU chart: one invocation's ``observed.perf.top_symbols`` ordered for a
reader, the client's own functions first and the addresses perf could not name folded into
one "<dso>, no symbols" row per object.

    bars = symbol_bars(inv.observed.perf, client="backup-client")
    [b.label for b in bars]   # ["hash_file", "main", "SHA256_Update (libcrypto.so.3)", ...,
                              #  "libcrypto.so.3, no symbols"]

A row of perf's report that is a bare address (``0x00007f…``) or ``[unknown]`` says where a
sample fell, not what ran there; fifteen such rows of libcrypto and libc would otherwise
crowd the client's own functions out of the chart. Pure functions of the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lab.model import PerfSummary

#: what perf prints for a sample it could not name: a bare address, or "[unknown]"
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def unresolved_label(dso: str) -> str:
    """One bar for an object's samples perf could not name: "libcrypto.so.3, no symbols"."""
    name = "unknown object" if dso in ("", "[unknown]") else dso
    return f"{name}, no symbols"


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


def client_dsos(perf: PerfSummary, client: str | None = None) -> set[str]:
    """The DSO names perf gave the client binary: the recorded client name, the DSO of the
    collector's ``top_client_symbol`` (chosen among the client's own functions) and of
    ``main``."""
    names = {client} if client else set()
    names |= {s.dso for s in perf.top_symbols if s.symbol in (perf.top_client_symbol, "main")}
    return names


def symbol_bars(perf: PerfSummary, client: str | None = None) -> list[SymbolBar]:
    """One invocation's ``top_symbols`` as chart rows: the client's own functions first, then
    the other named symbols, then one "<dso>, no symbols" row per DSO whose samples perf
    could not name (hex addresses, "[unknown]"), each group by inclusive share.

    A folded row's self share is the sum of its addresses' (each sample has one self
    address); its inclusive share is the largest of theirs, since their call chains overlap
    (perf lists one address both DSO-relative and absolute) and a sum would count samples
    twice.
    """
    own_dsos = client_dsos(perf, client)
    named: list[SymbolBar] = []
    folded: dict[str, tuple[float, float]] = {}
    for sym in perf.top_symbols:
        if is_unresolved(sym.symbol):
            was = folded.get(sym.dso)
            folded[sym.dso] = (
                (sym.inclusive_pct, sym.self_pct)
                if was is None
                else (max(was[0], sym.inclusive_pct), round(was[1] + sym.self_pct, 2))
            )
            continue
        own = sym.dso in own_dsos
        label = sym.symbol if own else f"{sym.symbol} ({sym.dso})"
        named.append(SymbolBar(label, sym.dso, own, False, sym.inclusive_pct, sym.self_pct))
    unresolved = [
        SymbolBar(unresolved_label(dso), dso, dso in own_dsos, True, inc, slf)
        for dso, (inc, slf) in folded.items()
    ]

    def rank(bar: SymbolBar) -> tuple[float, float, str]:
        return (-(bar.inclusive_pct or 0.0), -(bar.self_pct or 0.0), bar.label)

    return (
        sorted((b for b in named if b.own), key=rank)
        + sorted((b for b in named if not b.own), key=rank)
        + sorted(unresolved, key=rank)
    )
