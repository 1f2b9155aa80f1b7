"""lab.sandbox.boxfs: the mount table parser, the disk-use record, and removal by rm (a
deep tree, which shutil.rmtree cannot remove, is removed without recursing in Python)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from lab.sandbox import boxfs

MOUNTINFO = (
    "22 1 0:21 / /tmp rw - tmpfs tmpfs rw\n"
    "90 22 0:50 / /tmp/lab-pass-x/home rw - tmpfs lab-box rw,size=1024k\n"
    "91 22 0:51 / /tmp/lab-pass-x/tmp rw - tmpfs lab-box rw,size=1024k\n"
    "92 22 0:52 / /tmp/lab-pass-xy rw - tmpfs lab-box rw\n"
    "93 22 0:53 / /tmp/lab\\040pass/home rw - tmpfs lab-box rw\n"
)


def test_mounts_under_finds_only_what_is_below_deepest_first() -> None:
    got = boxfs.mounts_under(Path("/tmp/lab-pass-x"), MOUNTINFO)
    assert sorted(got) == [Path("/tmp/lab-pass-x/home"), Path("/tmp/lab-pass-x/tmp")]
    assert boxfs.mounts_under(Path("/tmp/lab pass"), MOUNTINFO) == [Path("/tmp/lab pass/home")]
    assert boxfs.mounts_under(Path("/srv"), MOUNTINFO) == []


def test_a_full_directory_is_at_its_bytes_or_its_inodes_bound() -> None:
    roomy = boxfs.DiskUse(bytes_used=4096, bytes_max=1 << 20, inodes_used=3, inodes_max=100)
    assert not roomy.full
    assert boxfs.DiskUse(bytes_used=1 << 20, bytes_max=1 << 20, inodes_used=3, inodes_max=100).full
    assert boxfs.DiskUse(bytes_used=0, bytes_max=1 << 20, inodes_used=100, inodes_max=100).full
    assert roomy.to_dict()["full"] is False


def test_usage_reads_the_file_system(tmp_path: Path) -> None:
    use = boxfs.usage(tmp_path)
    assert use is not None and use.bytes_max > 0
    assert boxfs.usage(tmp_path / "missing") is None


def test_a_deep_tree_is_removed_without_python_recursion(tmp_path: Path) -> None:
    root = tmp_path / "scratch"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(3000):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(RecursionError):
            shutil.rmtree(root)  # what the lab did before
    finally:
        sys.setrecursionlimit(limit)
    assert boxfs.remove_tree(root) is None
    assert not root.exists()
    assert boxfs.remove_tree(root) is None  # already gone: nothing to say
