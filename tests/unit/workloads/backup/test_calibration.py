"""lab.workloads.backup.calibration: expectations compared with what was observed, built by hand; an
observer that did not run is "not observed" with its reason, never a zero."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lab.model import Invocation, Observed, Pass, ScenarioResult, StraceSummary
from lab.workloads.backup import calibration
from lab.workloads.backup.scenario import Expect, Expectation, Scenario
from tests.unit.workloads.backup.test_contract import DECOY, RX, inv

SIZE = 1000


def scenario(*findings: Expectation, invocations: int = 2) -> Scenario:
    return Scenario(
        name="s",
        description="by hand",
        path=Path("scenarios/s.yaml"),
        behavior="baseline",
        client_args=[],
        preload="none",
        faults=[],
        invocations=invocations,
        expect=Expect(verdicts={}, findings=list(findings)),
        text="",
    )


def expect(
    observer: str, key: str, value: Any, *, op: str = "equals", invocation: int | None = 1
) -> Expectation:
    return Expectation(observer, invocation, key, op, value, note="why this matters")


def result(*passes: Pass) -> ScenarioResult:
    return ScenarioResult("s", 1, "by hand", "scenarios/s.yaml", list(passes))


def a_pass(collector: str, *invocations: Invocation, error: str | None = None) -> Pass:
    return Pass(collector, list(invocations), RX, DECOY, error=error)


def strace(index: int, **summary: Any) -> Invocation:
    return inv(index, observed=Observed(strace=StraceSummary(**summary)))


@pytest.mark.parametrize(
    ("op", "expected", "observed", "met"),
    [
        ("equals", 2, 2, True),
        ("equals", 2, 3, False),
        ("equals", ["b", "a"], ["a", "b"], True),  # lists compare as sets of strings
        ("equals", [1, 2], ["1", "2"], True),
        ("equals", ["a"], ["a", "a"], False),
        ("at_least", 5, 5, True),
        ("at_least", 5, 4, False),
        ("at_least", 5, "many", False),
        ("at_most", 5, 5.0, True),
        ("at_most", 5, 6, False),
        ("at_most", 5, None, False),
        ("contains", "a", ["a", "b"], True),
        ("contains", ["a", "c"], ["a", "b"], False),
        ("contains", "a", "abc", False),  # only a list can contain
    ],
)
def test_comparison_ops(op: str, expected: Any, observed: Any, met: bool) -> None:
    # any record value a scenario file names can be compared, whatever its type
    assert calibration._compare(op, expected, observed) is met
    (finding,) = calibration.evaluate(
        scenario(expect("strace", "connects", expected, op=op)),
        result(a_pass("strace", strace(1, connects=3))),
        size=SIZE,
    )
    assert finding.met is calibration._compare(op, expected, 3) and finding.observed == 3
    assert finding.reason == "why this matters"
    assert finding.expected == (expected if op == "equals" else f"{op} {expected!r}")


def test_an_unknown_op_is_a_bug() -> None:
    with pytest.raises(ValueError):
        calibration._compare("roughly", 1, 1)


def test_size_formulas_and_addresses_are_resolved() -> None:
    findings = calibration.evaluate(
        scenario(
            expect("receiver", "payload_bytes_consumed", "2 * {size}"),
            expect("strace", "destinations", ["{receiver}"]),
            invocations=1,
        ),
        result(
            a_pass("none", inv(1, payload=2 * SIZE)),
            a_pass("strace", strace(1, destinations=(RX,))),
        ),
        size=SIZE,
    )
    assert [(f.expected, f.met) for f in findings] == [(2 * SIZE, True), ([RX], True)]


def test_the_lab_s_own_records_come_from_the_primary_pass() -> None:
    (finding,) = calibration.evaluate(
        scenario(expect("receiver", "payload_bytes_consumed", 100), invocations=1),
        result(a_pass("strace", inv(1, payload=7)), a_pass("none", inv(1, payload=100))),
        size=SIZE,
    )
    assert finding.met is True and finding.observed == 100


def test_an_expectation_without_invocation_covers_every_invocation() -> None:
    findings = calibration.evaluate(
        scenario(expect("verifier", "matches_source", True, invocation=None), invocations=2),
        result(a_pass("none", inv(1), inv(2, matches=False))),
        size=SIZE,
    )
    assert [(f.invocation, f.met) for f in findings] == [(1, True), (2, False)]


def test_an_observer_that_did_not_run_is_not_observed() -> None:
    findings = calibration.evaluate(
        scenario(expect("bpftrace", "hash_calls", 1, invocation=None), invocations=2),
        result(a_pass("none", inv(1), inv(2))),
        size=SIZE,
    )
    assert [(f.invocation, f.met, f.observed) for f in findings] == [
        (1, None, None),
        (2, None, None),
    ]
    assert {f.reason for f in findings} == {"bpftrace did not run in this scenario"}


def test_the_reason_is_the_pass_error_or_the_invocation_s() -> None:
    failed = a_pass("bpftrace", inv(1), error="bpftrace exited 1: no BTF")
    (finding,) = calibration.evaluate(
        scenario(expect("bpftrace", "hash_calls", 1, op="at_least"), invocations=1),
        result(a_pass("none", inv(1)), failed),
        size=SIZE,
    )
    assert finding.met is None and finding.reason == "bpftrace exited 1: no BTF"
    assert finding.expected == "at_least 1"
    missing = inv(1)
    missing.missing["packets"] = "capture is off (--packets off)"
    (finding,) = calibration.evaluate(
        scenario(expect("packets", "packets", 0), invocations=1),
        result(a_pass("none", missing)),
        size=SIZE,
    )
    assert finding.met is None and finding.reason == "capture is off (--packets off)"


def test_a_key_the_observer_does_not_report() -> None:
    (finding,) = calibration.evaluate(
        scenario(expect("strace", "no_such_key", 1), invocations=1),
        result(a_pass("strace", strace(1, connects=2))),
        size=SIZE,
    )
    assert finding.met is None and finding.observed is None
    assert finding.reason == "strace does not report 'no_such_key' for this client"


def test_an_invocation_that_did_not_run() -> None:
    findings = calibration.evaluate(
        scenario(expect("strace", "connects", 1, invocation=None), invocations=2),
        result(a_pass("strace", strace(1, connects=1))),
        size=SIZE,
    )
    assert [(f.invocation, f.met) for f in findings] == [(1, True), (2, None)]
    assert findings[1].reason == "invocation 2 did not run in the strace pass"


def test_an_observer_that_saw_only_some_invocations() -> None:
    unseen = inv(2)
    unseen.missing["strace"] = "strace could not attach"
    findings = calibration.evaluate(
        scenario(expect("strace", "connects", 1, invocation=None), invocations=2),
        result(a_pass("strace", strace(1, connects=1), unseen)),
        size=SIZE,
    )
    assert [(f.met, f.reason) for f in findings] == [
        (True, "why this matters"),
        (None, "strace could not attach"),
    ]


def test_a_key_the_observer_says_it_could_not_observe_is_not_observed_with_its_reason() -> None:
    why = "strace printed 3 of the client's descriptors without their paths"
    (finding,) = calibration.evaluate(
        scenario(expect("strace", "source_bytes_read", 1000)),
        result(
            a_pass(
                "strace",
                strace(
                    1, connects=2, source_bytes_read=None, unobserved={"source_bytes_read": why}
                ),
            )
        ),
        size=SIZE,
    )
    assert finding.met is None and finding.observed is None
    assert finding.reason == why
