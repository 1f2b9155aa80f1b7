"""A pass's network namespace is deleted whenever it exists, even when the ``ip netns add``
that made it was stopped before the lab heard it succeed (SIGTERM during the passes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import SandboxError
from lab.sandbox import netns
from lab.sandbox.netns import NetworkNamespace


def _failing_add(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, made: bool
) -> list[tuple[str, ...]]:
    """``ip`` replaced by a fake whose ``netns add`` fails, after making the namespace when
    ``made`` (the kernel made it, then the add was killed); returns the calls it gets."""
    monkeypatch.setattr(netns, "NETNS_DIR", tmp_path)
    calls: list[tuple[str, ...]] = []

    def ip(self: NetworkNamespace, *args: str, purpose: str) -> None:
        calls.append(args)
        if args[:2] == ("netns", "add"):
            if made:
                (tmp_path / self.name).touch()
            raise SandboxError("ip was killed by signal 15" if made else "ip could not start")
        if args[:2] == ("netns", "delete"):
            (tmp_path / self.name).unlink()

    monkeypatch.setattr(NetworkNamespace, "_ip", ip)
    return calls


def test_a_namespace_made_by_an_interrupted_add_is_still_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _failing_add(tmp_path, monkeypatch, made=True)
    with pytest.raises(SandboxError), NetworkNamespace.created("lab-1-t"):
        pass
    assert ("netns", "delete", "lab-1-t") in calls
    assert not (tmp_path / "lab-1-t").exists()


def test_a_namespace_never_made_is_not_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _failing_add(tmp_path, monkeypatch, made=False)
    with pytest.raises(SandboxError), NetworkNamespace.created("lab-1-t"):
        pass
    assert calls == [("netns", "add", "lab-1-t")]
