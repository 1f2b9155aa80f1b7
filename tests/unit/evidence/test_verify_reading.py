"""Verification that also reads members (lab.evidence.verify.verify_reading): the bytes it
returns are the ones its checks hashed in the same pass over the archive; a member too large
or not there is not returned; a tampered archive returns nothing, it raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.evidence.archive import ArchiveInfo
from lab.evidence.scan import Limits
from lab.evidence.signing import Signer
from lab.evidence.verify import VerificationError, verify_archive, verify_reading
from tests.unit.evidence.test_verify import RUN_FILES, Entry, find, make_archive, tampered


@pytest.fixture
def good(tmp_path: Path) -> ArchiveInfo:
    return make_archive(tmp_path, Signer.ephemeral())


def test_the_members_asked_for_come_back_as_verified(good: ArchiveInfo) -> None:
    names = ("results.json", "baseline/r1/none/capture.pcap", "no-such-file")
    report, read = verify_reading(good.path, names)
    assert report.ok and report.run_id == "run-1"
    assert read == {name: RUN_FILES[name] for name in names[:2]}  # the absent one is absent
    # the same checks as verify_archive's, in the same order
    assert report.to_dict() == verify_archive(good.path).to_dict()


def test_a_member_beyond_the_read_limit_is_checked_but_not_read(good: ArchiveInfo) -> None:
    size = len(RUN_FILES["baseline/r1/none/capture.pcap"])
    small = Limits(max_read_size=size - 1)
    report, read = verify_reading(
        good.path, ("results.json", "baseline/r1/none/capture.pcap"), limits=small
    )
    assert report.ok and set(read) == {"results.json"}


def test_a_changed_member_is_never_returned(good: ArchiveInfo, tmp_path: Path) -> None:
    def change(entries: list[Entry]) -> None:
        i = find(entries, "results.json")
        entries[i] = (entries[i][0], b'{"schema_version": 2}')

    path = tampered(good, tmp_path, change)
    with pytest.raises(VerificationError, match=r"results\.json"):
        verify_reading(path, ("results.json",))


def test_a_directory_is_verified_and_nothing_is_read(good: ArchiveInfo) -> None:
    run_dir = good.path.parent / "run-1"
    report, read = verify_reading(run_dir, ("results.json",))
    assert report.ok and read == {}
