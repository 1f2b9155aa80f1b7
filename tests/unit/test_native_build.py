"""The native client builds with ``make -C native`` and keeps what the probes need.

The probes attach uprobes to ``hash_file``, ``send_payload`` and ``busy_wait`` by name, so
the binary must export them as real (``T``) symbols, with no compiler clone such as
``hash_file.constprop.0`` that could take the calls. The build must also be reproducible:
the same sources built in two different directories give the same bytes and embed neither
directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

from lab.host.procs import Completed, run
from tests.conftest import require

PROBED_SYMBOLS = ("hash_file", "send_payload", "busy_wait")
#: what ``make -C native`` needs besides the sources
BUILD_TOOLS = ("make", "cc", "nm")
OPENSSL_HEADER = Path("/usr/include/openssl/evp.h")


def require_toolchain() -> None:
    missing = [tool for tool in BUILD_TOOLS if shutil.which(tool) is None]
    if not OPENSSL_HEADER.exists():
        missing.append("libssl-dev (openssl/evp.h)")
    require("native-build", not missing, f"missing {', '.join(missing)}" if missing else None)


def make(directory: Path, tmp_path: Path, *args: str, tag: str = "make") -> Completed:
    return run(
        ["make", "-C", str(directory), *args],
        purpose=f"build the native client ({tag})",
        tool="make",
        stdout=tmp_path / f"{tag}.out",
        stderr=tmp_path / f"{tag}.err",
        timeout=300,
    )


def copy_sources(src: Path, dest: Path) -> Path:
    """A copy of native/ without build outputs, so a build there starts from nothing."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.o", "*.d", "backup-client"))
    return dest


def symbol_table(binary: Path, tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "nm.out"
    run(["nm", str(binary)], purpose="list symbols", tool="nm", stdout=out)
    table: dict[str, str] = {}
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            table[parts[2]] = parts[1]
    return table


def test_make_builds_binary_with_probed_symbols(repo_root: Path, tmp_path: Path) -> None:
    require_toolchain()
    native = repo_root / "native"
    make(native, tmp_path)
    binary = native / "backup-client"
    assert binary.is_file()
    assert os.access(binary, os.X_OK)

    table = symbol_table(binary, tmp_path)
    for name in PROBED_SYMBOLS:
        assert table.get(name) == "T", f"{name} is not a global text symbol: {table.get(name)}"
    clones = sorted(s for s in table if re.match(r"(hash_file|send_payload|busy_wait)\.", s))
    assert clones == [], f"compiler clones would hide calls from the uprobes: {clones}"


def test_build_is_reproducible_and_embeds_no_build_path(repo_root: Path, tmp_path: Path) -> None:
    require_toolchain()
    digests = []
    for name in ("first-tree", "second-tree"):
        tree = copy_sources(repo_root / "native", tmp_path / name)
        make(tree, tmp_path, tag=name)
        data = (tree / "backup-client").read_bytes()
        assert str(tree).encode() not in data, f"{tree} is embedded in the binary"
        digests.append(hashlib.sha256(data).hexdigest())
    assert digests[0] == digests[1]


def test_clean_removes_outputs_and_overrides_are_honoured(repo_root: Path, tmp_path: Path) -> None:
    require_toolchain()
    tree = copy_sources(repo_root / "native", tmp_path / "tree")
    make(tree, tmp_path, "CFLAGS=-std=c11 -O0 -g -Wall -Werror", tag="override")
    log = (tmp_path / "override.out").read_text()
    assert "-O0" in log
    assert "-O2" not in log
    # the reproducibility flag stays even when CFLAGS is replaced
    assert "-ffile-prefix-map=" in log
    table = symbol_table(tree / "backup-client", tmp_path)
    assert all(table.get(name) == "T" for name in PROBED_SYMBOLS)

    make(tree, tmp_path, "clean", tag="clean")
    leftovers = sorted(p.name for p in tree.iterdir() if p.suffix == ".o")
    assert leftovers == []
    assert not (tree / "backup-client").exists()


@pytest.mark.parametrize("ignored", ["backup-client", "hash.o"])
def test_gitignore_covers_build_outputs(repo_root: Path, ignored: str) -> None:
    patterns = (repo_root / "native" / ".gitignore").read_text().split()
    assert any(
        p.lstrip("/") == ignored or (p.startswith("*") and ignored.endswith(p[1:]))
        for p in patterns
    )
