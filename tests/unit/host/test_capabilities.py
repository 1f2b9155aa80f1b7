"""lab.host.capabilities: the one capability table and mask decoder, and its three users."""

from __future__ import annotations

from pathlib import Path

from lab.collectors import bpftrace, perf_event
from lab.container import run as container
from lab.host import capabilities, doctor
from lab.host.capabilities import (
    CAP_BPF,
    CAP_PERFMON,
    CAP_SYS_ADMIN,
    CAPABILITY_NAMES,
    capability_mask,
    decode_capabilities,
    effective_capabilities,
    effective_mask,
)

# /proc/self/status of root on this lab's machine (trimmed), and of a default Docker
# container (CapEff 00000000a80425fb).
STATUS_ROOT = """Name:\tcat
Umask:\t0022
State:\tR (running)
CapInh:\t0000000000000000
CapPrm:\t000001fffeffffff
CapEff:\t000001fffeffffff
CapBnd:\t000001fffeffffff
CapAmb:\t0000000000000000
NoNewPrivs:\t0
"""
STATUS_DOCKER = "CapPrm:\t00000000a80425fb\nCapEff:\t00000000a80425fb\n"


def test_root_capabilities_here() -> None:
    mask = capability_mask(STATUS_ROOT)
    assert mask == "000001fffeffffff"
    names = decode_capabilities(mask)
    # Every capability up to CAP_CHECKPOINT_RESTORE (40) except CAP_SYS_RESOURCE (24).
    assert len(names) == 40
    assert "CAP_SYS_RESOURCE" not in names
    assert names[0] == "CAP_CHOWN"
    assert names[-1] == "CAP_CHECKPOINT_RESTORE"
    assert {"CAP_PERFMON", "CAP_BPF", "CAP_NET_RAW", "CAP_SYS_ADMIN"} <= set(names)


def test_docker_default_capabilities() -> None:
    mask = capability_mask(STATUS_DOCKER)
    assert mask is not None
    assert decode_capabilities(mask) == [
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FOWNER",
        "CAP_FSETID",
        "CAP_KILL",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETPCAP",
        "CAP_NET_BIND_SERVICE",
        "CAP_NET_RAW",
        "CAP_SYS_CHROOT",
        "CAP_MKNOD",
        "CAP_AUDIT_WRITE",
        "CAP_SETFCAP",
    ]


def test_capability_edge_cases() -> None:
    assert decode_capabilities("0000000000000000") == []
    assert decode_capabilities(f"{1 << 41 | 1:x}") == ["CAP_CHOWN", "CAP_41"]
    assert len(CAPABILITY_NAMES) == 41
    assert capability_mask(STATUS_ROOT, "CapAmb") == "0000000000000000"
    assert capability_mask("Name:\tx\n") is None


def test_bit_numbers_come_from_the_table() -> None:
    assert (CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF) == (21, 38, 39)
    assert (bpftrace.CAP_SYS_ADMIN, bpftrace.CAP_PERFMON, bpftrace.CAP_BPF) == (21, 38, 39)


def test_docker_spelling_drops_the_prefix() -> None:
    assert decode_capabilities("00000000a80425fb", prefix=False)[:3] == [
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
    ]
    assert decode_capabilities(f"{1 << 41 | 1:x}", prefix=False) == ["CHOWN", "CAP_41"]
    assert container.decode_capabilities("00000000a80425fb") == decode_capabilities(
        "00000000a80425fb", prefix=False
    )


def test_effective_mask_and_names_from_a_status_file(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text(STATUS_ROOT)
    assert effective_mask(status) == 0x1FFFEFFFFFF
    assert effective_mask(status) >> CAP_BPF & 1
    assert effective_capabilities(status) == decode_capabilities("000001fffeffffff")
    assert effective_mask(tmp_path / "missing") == 0
    assert effective_capabilities(tmp_path / "missing") == []
    status.write_text("CapEff:\tnot-hex\n")
    assert effective_mask(status) == 0


def test_one_table_for_every_user() -> None:
    assert doctor.CAPABILITY_NAMES is capabilities.CAPABILITY_NAMES
    assert perf_event.effective_capabilities is capabilities.effective_capabilities
    assert bpftrace.effective_mask is capabilities.effective_mask
