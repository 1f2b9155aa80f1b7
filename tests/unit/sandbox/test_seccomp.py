"""The system-call filter's observer: the kernel's audit records of its refusals, read from
/dev/kmsg records, attributed by uid, never a zero where nothing could be read."""

from __future__ import annotations

import os
import shutil

import pytest

from lab.errors import SandboxError
from lab.evaluate.verdicts import client_contract
from lab.model.invocation import SandboxRecord
from lab.reports.scenario import refused_text
from lab.sandbox import helpers, seccomp
from tests.conftest import require

NAMES = {
    "c000003e:250": "keyctl",
    "c000003e:101": "ptrace",
    "c000003e:165": "mount",
    "40000003:21": "mount",
}


def record(seq: int, uid: int, syscall: int, code: str = "0x50000", arch: str = "c000003e") -> str:
    return (
        f"5,{seq},19322833502,-;audit: type=1326 audit(1796228781.950:{seq}): auid=4294967295 "
        f'uid={uid} gid={uid} ses=4294967295 pid=13845 comm="client" exe="/box/client" '
        f"sig=0 arch={arch} syscall={syscall} compat=0 ip=0x7f9050348829 code={code}"
    )


def test_the_client_users_refusals_are_counted_and_kept_verbatim() -> None:
    lines = [
        record(1, 989, 250),
        record(2, 989, 250),
        record(3, 989, 101),
        record(4, 1000, 165),  # another user's (another engineer's client, say)
        record(5, 989, 165, code="0x7ffc0000"),  # a log action, not a refusal
        record(6, 989, 999),  # a number the table does not name
        record(9, 989, 21, arch="40000003"),  # mount through int 0x80 (the 32-bit table)
        "4,7,19322833600,-;kauditd_printk_skb: 12 callbacks suppressed",
        "6,8,19322833700,-;lo: entered promiscuous mode",
    ]
    found = seccomp.parse(lines, uid=989, names=NAMES)
    assert found.observed and found.calls == {
        "keyctl": 2, "ptrace": 1, "mount": 1, "syscall 999 (arch c000003e)": 1
    }  # fmt: skip
    assert found.total == 5 and found.suppressed == 12
    assert found.raw[0].startswith("audit: type=1326") and "uid=989" in found.raw[0]
    row = found.to_dict()
    assert row["observer"] == seccomp.OBSERVER and row["total"] == 5
    assert refused_text(row) == (
        "keyctl x2, mount x1, ptrace x1, syscall 999 (arch c000003e) x1 "
        "(and 12 record(s) the kernel dropped)"
    )


def test_an_unreadable_log_is_not_observed_never_none_refused() -> None:
    watch = seccomp.KmsgWatch(None, "/dev/kmsg cannot be read here (Permission denied)")
    found = watch.collect(uid=989, names=NAMES)
    assert not found.observed and found.calls == {}
    assert refused_text(found.to_dict()) == (
        "not observed: /dev/kmsg cannot be read here (Permission denied)"
    )
    assert SandboxRecord(enabled=True, refused=found.to_dict()).refused_calls == {}
    assert refused_text(seccomp.Refusals(observed=True).to_dict()) == "none"
    assert refused_text(None) == "not recorded"


def test_a_refusal_is_a_violation_of_the_client_contract() -> None:
    from tests.unit.reports.reports_sample import build_sample_run

    result = build_sample_run()
    inv = result.scenarios[0].passes[0].invocations[0]
    found = seccomp.parse([record(1, 989, 250), record(2, 989, 101)], uid=989, names=NAMES)
    inv.sandbox = SandboxRecord(enabled=True, refused=found.to_dict())
    contract = client_contract(result.scenarios)
    assert not contract.honoured
    problems = [v.problem for v in contract.violations]
    assert any("2 system call(s) the sandbox refuses (keyctl x1, ptrace x1" in p for p in problems)


def test_the_filter_builds_and_lists_what_it_refuses() -> None:
    have = shutil.which("cc") is not None and os.path.exists("/usr/include/seccomp.h")
    require("sandbox", have, "no C compiler or libseccomp-dev here (the sandbox needs both)")
    table = seccomp.refused_calls(seccomp.helper())
    named = set(table.values())
    assert seccomp.key("c000003e", 165) in table or "aarch64" in os.uname().machine
    wanted = {"ptrace", "keyctl", "bpf", "perf_event_open", "mount", "unshare", "userfaultfd"}
    wanted.add("clone")  # with a namespace flag (its refusal is logged under this name)
    assert wanted <= named
    assert len(seccomp.source_digest()) == 64


def test_a_missing_filter_source_is_one_sentence() -> None:
    missing = helpers.NativeHelper("lab-filter", "native/filter/gone.c", "the filter")
    with pytest.raises(SandboxError, match=r"the filter source .*gone.c cannot be read"):
        missing.digest()
