"""lab.host.doctor: mount decisions, reasons, presenters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.host import doctor
from lab.host.capabilities import CAPABILITY_NAMES
from lab.host.doctor import (
    DEBUGFS,
    TRACEFS,
    Doctor,
    Mount,
    check,
    cpu_model,
    ensure_mounted,
    is_mounted,
    mounted_filesystems,
    probe_collector,
    render_table,
    to_json,
)
from lab.model import ObserverStatus

MOUNTS = """sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
nodev /sys/kernel/tracing tracefs rw,relatime 0 0
tracefs /sys/kernel/debug/tracing tracefs rw,relatime 0 0
/dev/vda /mnt/with\\040space ext4 rw,relatime 0 0
"""


def test_mount_table() -> None:
    table = mounted_filesystems(MOUNTS)
    assert table["/sys/kernel/tracing"] == "tracefs"
    assert table["/mnt/with space"] == "ext4"
    assert is_mounted(TRACEFS, table)
    # tracefs under /sys/kernel/debug/tracing does not mean debugfs is mounted.
    assert not is_mounted(DEBUGFS, table)


def test_mounts_missing_filesystems_as_root() -> None:
    table = mounted_filesystems(MOUNTS)
    calls: list[Mount] = []

    def mounter(mount: Mount) -> str | None:
        calls.append(mount)
        return None

    actions = ensure_mounted((TRACEFS, DEBUGFS), table, is_root=True, mounter=mounter)
    assert calls == [DEBUGFS]
    assert actions == ["mounted debugfs at /sys/kernel/debug"]


def test_mount_failure_and_non_root_are_reported() -> None:
    empty: dict[str, str] = {}
    actions = ensure_mounted(
        (TRACEFS,), empty, is_root=True, mounter=lambda m: "mount: permission denied"
    )
    assert actions == ["could not mount tracefs at /sys/kernel/tracing: mount: permission denied"]

    def never(mount: Mount) -> str | None:
        raise AssertionError("a non-root user must not try to mount")

    actions = ensure_mounted((TRACEFS, DEBUGFS), empty, is_root=False, mounter=never)
    assert actions == [
        "tracefs is not mounted at /sys/kernel/tracing and only root can mount it",
        "debugfs is not mounted at /sys/kernel/debug and only root can mount it",
    ]


def test_cpu_model() -> None:
    text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t\t: fpu\n"
    assert cpu_model(text) == "AMD EPYC"
    assert cpu_model("processor\t: 0\n") is None


def test_unloadable_collector_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        doctor._COLLECTOR_CLASSES, "strace", ("lab.collectors.no_such_module", "StraceCollector")
    )
    status = probe_collector("strace")
    assert not status.available
    assert status.reason is not None
    assert status.reason.startswith(
        "the strace collector could not be loaded (ModuleNotFoundError:"
    )


def test_raising_probe_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        @classmethod
        def probe(cls) -> ObserverStatus:
            raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "Broken", Broken, raising=False)
    monkeypatch.setitem(doctor._COLLECTOR_CLASSES, "perf", ("lab.host.doctor", "Broken"))
    status = probe_collector("perf")
    assert status.reason == "the perf collector's probe failed (RuntimeError: boom)"


def test_missing_tools_name_their_packages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no tool is installed
    result = check(mount=False)
    assert result.actions == []
    assert set(result.observers) == {"strace", "bpftrace", "perf", "packets"}
    packages = {
        "strace": "strace",
        "bpftrace": "bpftrace",
        "perf": "linux-perf",
        "packets": "tcpdump",
    }
    for name, package in packages.items():
        status = result.observers[name]
        assert not status.available, name
        assert status.reason is not None
        assert "is not installed" in status.reason, status.reason
        assert f"install the Debian package '{package}'" in status.reason, status.reason
    assert result.facts["tool_versions"] == {
        "strace": None,
        "bpftrace": None,
        "perf": None,
        "tcpdump": None,
        "gcc": None,
        "cc": None,
        "make": None,
        "openssl": None,
    }


def _sample() -> Doctor:
    return Doctor(
        observers={
            "packets": ObserverStatus(True),
            "strace": ObserverStatus(
                False, "strace is not installed or not on PATH; install the Debian package 'strace'"
            ),
        },
        facts={
            "kernel_release": "6.18.44",
            "is_root": True,
            "capabilities": [n for n in CAPABILITY_NAMES if n != "CAP_SYS_RESOURCE"],
            "perf_event_paranoid": None,
            "tool_versions": {"strace": None, "tcpdump": "tcpdump version 4.99.3"},
        },
        actions=["mounted tracefs at /sys/kernel/tracing"],
    )


def test_render_table() -> None:
    text = render_table(_sample(), width=200)
    lines = text.splitlines()
    header = next(line for line in lines if "collector" in line)
    assert "available" in header and "reason" in header
    strace = next(line for line in lines if "strace " in line and "install" in line)
    assert " no " in strace
    packets = next(line for line in lines if " packets " in line)
    assert " yes " in packets
    # The collectors table lists strace before packets (the doctor's fixed order).
    assert lines.index(strace) < lines.index(packets)
    assert "all except CAP_SYS_RESOURCE" in text
    assert "tcpdump version 4.99.3" in text
    assert "strace version" in text and "not installed" in text
    assert "unknown" in text  # perf_event_paranoid None
    assert "- mounted tracefs at /sys/kernel/tracing" in text
    assert "\x1b[" not in text  # no terminal escapes


def test_to_json_is_plain_data() -> None:
    data = to_json(_sample())
    assert json.loads(json.dumps(data)) == data
    assert list(data["observers"]) == ["packets", "strace"]
    assert data["observers"]["strace"]["available"] is False
    assert data["ok"] is False and "strace" in data["unavailable"]
    assert data["actions"] == ["mounted tracefs at /sys/kernel/tracing"]
    assert data["facts"]["kernel_release"] == "6.18.44"


def test_cli_json_is_one_document_on_stdout_and_the_table_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab._cli import main

    monkeypatch.setattr(doctor, "check", lambda **_: _sample())  # no probing of this machine
    assert main(["doctor", "--json", "--no-mount"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["ok"] is False and data["unavailable"] == ["strace"]
    assert "strace" in err and "not installed" in err
