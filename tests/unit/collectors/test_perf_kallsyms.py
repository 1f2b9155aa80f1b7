"""The pass's copy of the kernel's symbol table (lab.collectors.perf_kallsyms): made once in
the scratch directory, root's alone, and nothing at all without a scratch directory."""

from __future__ import annotations

from pathlib import Path

from lab.collectors import perf_kallsyms


def test_no_scratch_directory_means_no_copy_and_perf_as_before() -> None:
    assert perf_kallsyms.snapshot(None) is None
    assert perf_kallsyms.bind_prefix(None) == []
    assert perf_kallsyms.kallsyms_args(None) == []


def test_the_copy_is_made_once_private_and_named_to_perf_report(tmp_path: Path) -> None:
    table = perf_kallsyms.snapshot(tmp_path)
    assert table == tmp_path / perf_kallsyms.COPY_NAME
    assert table.stat().st_mode & 0o777 == 0o600
    assert table.read_bytes().splitlines()[0] == Path("/proc/kallsyms").read_bytes().splitlines()[0]
    made = table.stat().st_mtime_ns
    assert perf_kallsyms.snapshot(tmp_path) == table and table.stat().st_mtime_ns == made
    assert perf_kallsyms.kallsyms_args(table) == [f"--kallsyms={table}"]
    assert not list(tmp_path.glob("*.partial"))


def test_the_prefix_binds_the_copy_for_the_command_after_it(tmp_path: Path) -> None:
    table = tmp_path / perf_kallsyms.COPY_NAME
    table.write_text("0000000000000000 T _text\n")
    prefix = perf_kallsyms.bind_prefix(table)
    if not perf_kallsyms.namespace_possible():
        assert prefix == []  # perf then reads /proc/kallsyms itself
        return
    assert prefix[1:5] == ["--mount", "--propagation", "private", "--"]
    assert prefix[-1] == str(table) and "/proc/kallsyms" in prefix[-3]
