"""Per-test results from a verification command's own report: ``go test -json`` event lines
(stdout) or a JUnit XML file. The raw output is kept verbatim beside what is parsed.

    report = parse_go_test_json(stdout_bytes)
    report.tests["safestore.TestNested"], report.failed, report.problem
    report = parse_junit(xml_bytes)

A report that cannot be read says so (``problem``) and counts nothing: a missing report is
never a pass.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Any

#: a report larger than this is not parsed (the raw output is still kept)
MAX_REPORT_BYTES = 16 * 1024 * 1024
TestOutcome = str  # "pass" | "fail" | "skip"


@dataclass
class TestReport:
    #: "package.Test" (go) or "classname.name" (JUnit) -> pass, fail or skip
    tests: dict[str, TestOutcome] = field(default_factory=dict)
    #: packages (go) that failed as a whole (a build failure, a panic outside a test)
    failed_packages: list[str] = field(default_factory=list)
    #: lines of stdout that were not events (a build error's text, say)
    other_lines: int = 0
    problem: str | None = None

    @property
    def failed(self) -> list[str]:
        return sorted(t for t, o in self.tests.items() if o == "fail")

    @property
    def passed(self) -> int:
        return sum(1 for o in self.tests.values() if o == "pass")

    def to_dict(self) -> dict[str, Any]:
        return {
            "tests": dict(sorted(self.tests.items())),
            "passed": self.passed,
            "failed": self.failed,
            "skipped": sum(1 for o in self.tests.values() if o == "skip"),
            "failed_packages": sorted(self.failed_packages),
            "other_lines": self.other_lines,
            "problem": self.problem,
        }


def parse_go_test_json(data: bytes) -> TestReport:
    """``go test -json``: the last pass/fail/skip action of each test and package."""
    report = TestReport()
    if len(data) > MAX_REPORT_BYTES:
        report.problem = f"the report is over {MAX_REPORT_BYTES:,} bytes; not parsed"
        return report
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            report.other_lines += 1
            continue
        if not isinstance(event, dict):
            report.other_lines += 1
            continue
        action, package, test = event.get("Action"), event.get("Package"), event.get("Test")
        if action not in ("pass", "fail", "skip") or not isinstance(package, str):
            continue
        if isinstance(test, str):
            report.tests[f"{package}.{test}"] = str(action)
        elif action == "fail":
            report.failed_packages.append(package)
    if not report.tests and not report.failed_packages:
        report.problem = "no test result in the output (it did not build, or ran no test)"
    return report


def parse_junit(data: bytes) -> TestReport:
    """JUnit XML: each ``testcase`` passes unless it holds ``failure`` or ``error``
    (``skipped``: skip)."""
    report = TestReport()
    if len(data) > MAX_REPORT_BYTES:
        report.problem = f"the report is over {MAX_REPORT_BYTES:,} bytes; not parsed"
        return report
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        report.problem = "the JUnit report declares a DTD or entities; not parsed"
        return report
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        report.problem = f"the JUnit report is not XML ({error})"
        return report
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}".lstrip(".")
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            report.tests[name] = "fail"
        elif "skipped" in tags:
            report.tests[name] = "skip"
        else:
            report.tests[name] = "pass"
    if not report.tests:
        report.problem = "the JUnit report holds no testcase"
    return report
