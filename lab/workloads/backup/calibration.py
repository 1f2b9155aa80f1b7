"""Instrument calibration: for every scenario and every observer, what the scenario file
expected and what the run observed.

An observer that did not run gives ``met=None`` with the reason — never a zero compared
with an expectation.

    findings = evaluate(scenario, result, size=524_288)
"""

from __future__ import annotations

from typing import Any

from lab.model import Finding, Invocation, Pass, ScenarioResult
from lab.workloads.backup.scenario import Expectation, Scenario, resolve

#: observers recorded by the lab itself in every pass (not collectors)
_OWN = ("client", "receiver", "decoy", "verifier")


def _record(inv: Invocation, observer: str) -> dict[str, Any] | None:
    """The observer's record as ``results.json`` holds it: a scenario file's expectations
    name its keys (``observed.strace.connects``), so they are looked up by name here."""
    if observer == "client":
        return inv.claim.to_dict()
    if observer == "receiver":
        return inv.receiver.to_dict()
    if observer == "decoy":
        return inv.decoy.to_dict()
    if observer == "verifier":
        return inv.verifier.to_dict()
    summary = inv.observed.get(observer)
    return None if summary is None else summary.to_dict()


def _pass_for(result: ScenarioResult, observer: str) -> tuple[Pass | None, str | None]:
    """The pass whose records answer for ``observer`` (and why none does)."""
    if observer in _OWN:
        return result.primary, None
    reasons: list[str] = [p.error for p in result.passes if p.collector == observer and p.error]
    for p in result.passes:
        for inv in p.invocations:
            if observer in inv.observed:
                return p, None
            if observer in inv.missing:
                reasons.append(inv.missing[observer])
    why = reasons[0] if reasons else f"{observer} did not run in this scenario"
    return None, why


def _compare(op: str, expected: Any, observed: Any) -> bool:
    if op == "equals":
        if isinstance(expected, list) and isinstance(observed, list):
            return sorted(map(str, expected)) == sorted(map(str, observed))
        return bool(expected == observed)
    if op == "at_least":
        return isinstance(observed, int | float) and observed >= expected
    if op == "at_most":
        return isinstance(observed, int | float) and observed <= expected
    if op == "contains":
        items = expected if isinstance(expected, list) else [expected]
        return isinstance(observed, list) and all(i in observed for i in items)
    raise ValueError(op)


def _one(exp: Expectation, p: Pass, inv: Invocation, size: int, preload: str | None) -> Finding:
    addresses = {"receiver": p.receiver_address, "decoy": p.decoy_address}
    if preload is not None:
        addresses["preload"] = preload
    want = resolve(exp.value, size=size, addresses=addresses)
    record = _record(inv, exp.observer)
    label = f"{exp.op} {want!r}" if exp.op != "equals" else want
    if record is None:
        why = inv.missing.get(exp.observer, f"{exp.observer} did not observe this invocation")
        return Finding(exp.observer, inv.index, exp.key, label, None, None, why)
    if exp.key not in record:
        return Finding(
            exp.observer,
            inv.index,
            exp.key,
            label,
            None,
            None,
            record.get("unobserved", {}).get(exp.key)
            or f"{exp.observer} does not report '{exp.key}' for this client",
        )
    got = record[exp.key]
    met = _compare(exp.op, want, got)
    return Finding(exp.observer, inv.index, exp.key, label, got, met, exp.note)


def evaluate(scenario: Scenario, result: ScenarioResult, *, size: int) -> list[Finding]:
    findings: list[Finding] = []
    for exp in scenario.expect.findings:
        p, why = _pass_for(result, exp.observer)
        indexes = [exp.invocation] if exp.invocation else list(range(1, scenario.invocations + 1))
        if p is None:
            for i in indexes:
                want = exp.value if exp.op == "equals" else f"{exp.op} {exp.value!r}"
                findings.append(Finding(exp.observer, i, exp.key, want, None, None, why))
            continue
        by_index = {inv.index: inv for inv in p.invocations}
        for i in indexes:
            inv = by_index.get(i)
            if inv is None:
                findings.append(
                    Finding(
                        exp.observer,
                        i,
                        exp.key,
                        exp.value,
                        None,
                        None,
                        f"invocation {i} did not run in the {p.collector} pass",
                    )
                )
                continue
            findings.append(_one(exp, p, inv, size, p.preload_sha256))
    return findings
