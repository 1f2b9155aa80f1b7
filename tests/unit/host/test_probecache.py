"""lab.host.probecache: a successful probe is reused only with the same key (boot, binary,
inputs, privileges); a failure is never kept; a key that cannot be made always probes."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.host import probecache
from lab.model import ObserverStatus


def _counting(status: ObserverStatus) -> tuple[list[int], object]:
    calls: list[int] = []

    def probe() -> ObserverStatus:
        calls.append(1)
        return status

    return calls, probe


def _tool(tmp_path: Path) -> Path:
    tool = tmp_path / "bpftrace"
    tool.write_bytes(b"binary v1")
    return tool


def test_a_successful_probe_is_reused_with_the_same_key(tmp_path: Path) -> None:
    tool = _tool(tmp_path)
    calls, probe = _counting(ObserverStatus(True, None, {"version": "v0.17"}))
    args = {"tool": str(tool), "inputs": [b"script"], "probe": probe, "root": tmp_path / "c"}
    first = probecache.reuse_or_probe("bpftrace", **args)  # type: ignore[arg-type]
    again = probecache.reuse_or_probe("bpftrace", **args)  # type: ignore[arg-type]
    assert calls == [1] and first.available and again.available
    assert "probe_reused" not in first.detail
    assert again.detail["version"] == "v0.17"
    assert again.detail["probe_reused"]["probed_at"]


@pytest.mark.parametrize("change", ["inputs", "binary", "boot"])
def test_anything_the_outcome_depends_on_probes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    tool = _tool(tmp_path)
    calls, probe = _counting(ObserverStatus(True, None, {}))
    boot = tmp_path / "boot_id"
    boot.write_text("boot-1\n")
    monkeypatch.setattr(probecache, "BOOT_ID", boot)
    root = tmp_path / "c"
    probecache.reuse_or_probe("perf", tool=str(tool), inputs=[b"2"], probe=probe, root=root)  # type: ignore[arg-type]
    inputs = [b"2"]
    if change == "inputs":
        inputs = [b"-1"]  # kernel.perf_event_paranoid changed
    elif change == "binary":
        tool.write_bytes(b"binary v2, longer")  # perf upgraded
    else:
        boot.write_text("boot-2\n")  # rebooted
    probecache.reuse_or_probe("perf", tool=str(tool), inputs=inputs, probe=probe, root=root)  # type: ignore[arg-type]
    assert calls == [1, 1]


def test_a_failure_is_never_kept_and_no_key_means_always_probing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = _tool(tmp_path)
    calls, probe = _counting(ObserverStatus(False, "no BTF"))
    root = tmp_path / "c"
    for _ in range(2):
        got = probecache.reuse_or_probe(
            "bpftrace", tool=str(tool), inputs=[], probe=probe, root=root
        )  # type: ignore[arg-type]
        assert not got.available and got.reason == "no BTF"
    assert calls == [1, 1] and not root.exists()

    monkeypatch.setattr(probecache, "BOOT_ID", tmp_path / "missing")
    calls, probe = _counting(ObserverStatus(True, None, {}))
    for _ in range(2):
        probecache.reuse_or_probe("bpftrace", tool=str(tool), inputs=[], probe=probe, root=root)  # type: ignore[arg-type]
    assert calls == [1, 1]


def test_a_kept_record_that_is_not_one_is_ignored(tmp_path: Path) -> None:
    tool = _tool(tmp_path)
    root = tmp_path / "c"
    key = probecache.probe_key("bpftrace", str(tool), [])
    assert key is not None
    root.mkdir()
    (root / f"bpftrace-{key}.json").write_text("not json")
    calls, probe = _counting(ObserverStatus(True, None, {}))
    probecache.reuse_or_probe("bpftrace", tool=str(tool), inputs=[], probe=probe, root=root)  # type: ignore[arg-type]
    assert calls == [1]
