"""go test -json and JUnit reports -> per-test results; an unreadable report counts nothing."""

from __future__ import annotations

import json

from lab.workloads.testreport import parse_go_test_json, parse_junit


def _events(*rows: dict[str, str]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def test_go_test_json_keeps_each_tests_last_action() -> None:
    data = _events(
        {"Action": "run", "Package": "p", "Test": "TestA"},
        {"Action": "pass", "Package": "p", "Test": "TestA"},
        {"Action": "fail", "Package": "p", "Test": "TestB"},
        {"Action": "skip", "Package": "p", "Test": "TestC"},
        {"Action": "fail", "Package": "p"},
    )
    report = parse_go_test_json(data + b"# p [p.test]\n./x.go:1: oops\n")
    assert report.tests == {"p.TestA": "pass", "p.TestB": "fail", "p.TestC": "skip"}
    assert report.failed == ["p.TestB"] and report.failed_packages == ["p"]
    assert report.other_lines == 2 and report.problem is None


def test_a_build_failure_has_no_test_and_says_so() -> None:
    report = parse_go_test_json(b"# p\n./x.go:3:1: missing return\n")
    assert report.tests == {} and report.problem is not None


def test_junit_cases() -> None:
    xml = (
        b'<testsuites><testsuite><testcase classname="c" name="ok"/>'
        b'<testcase classname="c" name="bad"><failure/></testcase>'
        b'<testcase classname="c" name="err"><error/></testcase>'
        b'<testcase classname="c" name="skip"><skipped/></testcase></testsuite></testsuites>'
    )
    report = parse_junit(xml)
    assert report.tests == {"c.ok": "pass", "c.bad": "fail", "c.err": "fail", "c.skip": "skip"}


def test_junit_with_entities_or_garbage_is_not_parsed() -> None:
    bomb = b'<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite><testcase name="&a;"/></testsuite>'
    assert parse_junit(bomb).problem is not None and parse_junit(bomb).tests == {}
    assert parse_junit(b"not xml").problem is not None
