"""perf given the pass's copy of the kernel's symbol table (lab.collectors.perf_kallsyms):
``perf record`` under the copy writes the same kernel mapping and header into perf.data,
``perf report`` prints the same lines from it, the copy stays in the scratch directory (never
the evidence), and the host's /proc/kallsyms is untouched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lab.collectors import perf_kallsyms
from lab.collectors.base import InvocationContext
from lab.collectors.perf import PerfCollector
from lab.host.procs import CommandLog, run
from tests.conftest import require

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NATIVE_CLIENT = ROOT / "native" / "backup-client"


@pytest.fixture(scope="module")
def perf_available() -> None:
    status = PerfCollector.probe()
    require("perf", status.available, status.reason)


def _ctx(tmp_path: Path, scratch: Path | None) -> InvocationContext:
    out = tmp_path / "evidence"
    out.mkdir(parents=True, exist_ok=True)
    return InvocationContext(
        run_dir=tmp_path,
        out_dir=out,
        client_path=NATIVE_CLIENT,
        source_path=tmp_path / "source.bin",
        source_size=0,
        receiver_port=1,
        decoy_port=2,
        invocation=1,
        log=CommandLog(tmp_path / "commands.jsonl", root=tmp_path),
        scratch=scratch,
    )


def _kernel_map(data: Path) -> list[str]:
    """The kernel's mapping perf.data records (its start, size and reference symbol)."""
    perf = shutil.which("perf")
    assert perf is not None
    done = run(
        [perf, "script", "-i", str(data), "--show-mmap-events"],
        purpose="perf script (test)",
        capture=True,
        accept=None,
    )
    lines = done.output.decode().splitlines()
    return [ln.split(":", 1)[1] for ln in lines if "[kernel.kallsyms]_" in ln]


def test_perf_under_the_copy_records_and_reports_what_it_does_without_it(
    perf_available: None, tmp_path: Path
) -> None:
    # the sandbox's capability: bwrap needs the same mount namespaces as this
    require(
        "sandbox",
        perf_kallsyms.namespace_possible(),
        "unshare --mount is refused here (perf then reads /proc/kallsyms itself)",
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o700)
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(1 << 20))
    work = ["/bin/sh", "-c", f"for i in 1 2 3 4 5 6; do sha256sum {source}; done"]
    maps = {}
    for name, where in (("plain", None), ("copied", scratch)):
        ctx = _ctx(tmp_path / name, where)
        collector = PerfCollector()
        argv = collector.wrap(work, ctx)
        assert (argv[0].endswith("unshare")) == (where is not None), argv
        done = run(argv, purpose=f"sha256sum under perf ({name})", log=ctx.log, accept=None)
        assert done.exit_status == 0
        out = collector.collect(ctx, done)
        assert out.error is None, out.error
        maps[name] = _kernel_map(ctx.out_dir / "perf.data")
    assert maps["plain"] and maps["plain"] == maps["copied"]
    # the copy is the kernel's table; it stays in the scratch directory, never the evidence
    copy = scratch / perf_kallsyms.COPY_NAME
    assert copy.stat().st_mode & 0o777 == 0o600
    assert not list((tmp_path / "copied").rglob(perf_kallsyms.COPY_NAME))
    with open("/proc/kallsyms", "rb") as kernel:
        head = kernel.read(4096)
    assert copy.read_bytes()[:4096] == head
    # the bind was perf's alone: nothing covers the host's /proc/kallsyms
    mounts = Path("/proc/self/mountinfo").read_text().split()
    assert "/proc/kallsyms" not in mounts


def test_a_report_reads_the_same_lines_from_the_copy(perf_available: None, tmp_path: Path) -> None:
    perf = shutil.which("perf")
    assert perf is not None
    data = tmp_path / "perf.data"
    run(
        [perf, "record", "-q", "-N", "-e", "cpu-clock", "-g", "-o", str(data), "--", "sha256sum",
         str(NATIVE_CLIENT), str(NATIVE_CLIENT), str(NATIVE_CLIENT)],
        purpose="perf record (test)",
        stdout=tmp_path / "out.txt",
    )  # fmt: skip
    table = perf_kallsyms.snapshot(tmp_path)
    assert table is not None and perf_kallsyms.kallsyms_args(table) == [f"--kallsyms={table}"]
    reports = []
    for extra in ([], perf_kallsyms.kallsyms_args(table)):
        done = run(
            [perf, "report", "-i", str(data), *extra, "--children", "--stdio", "--sort",
             "symbol,dso"],
            purpose="perf report (test)",
            capture=True,
        )  # fmt: skip
        reports.append([ln for ln in done.output.decode().splitlines() if not ln.startswith("#")])
    assert reports[0] and reports[0] == reports[1]
