"""perf report's addr2line kept for the run (lab.collectors.addr2line): what perf reads
through the relay and the server is, byte for byte, what binutils prints itself, inline
chains included; the relay hands perf on to binutils when the server cannot be reached or
the form is not perf's; a shared object's addr2line starts once for every report, a box's
once a report; and a perf report made through the server prints what it prints without it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.collectors import addr2line
from lab.collectors.base import InvocationContext
from lab.collectors.perf import REPORT_FILE, PerfCollector
from lab.host.procs import CommandLog, run
from tests.conftest import require

pytestmark = pytest.mark.integration

#: two inlined levels under one function that is not: addr2line -i answers with a chain
SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
static inline __attribute__((always_inline)) unsigned inner(unsigned x)
{
    return (x * 2654435761u) ^ (x >> 13);
}
static inline __attribute__((always_inline)) unsigned middle(unsigned x)
{
    return inner(x + 1) + inner(x ^ 7);
}
unsigned __attribute__((noinline)) outer(unsigned x)
{
    return middle(x) ^ middle(x >> 3);
}
int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    unsigned sum = 0;
    for (unsigned long i = 0; i < rounds; i++)
        sum += outer((unsigned)i);
    printf("%u\n", sum);
    return 0;
}
"""


@pytest.fixture(scope="module")
def binutils() -> str:
    require("cc", shutil.which("cc") is not None, "no C compiler (apt-get install gcc)")
    found = shutil.which("addr2line")
    require("binutils", found is not None, "no addr2line (apt-get install binutils)")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def inlined(tmp_path_factory: pytest.TempPathFactory, binutils: str) -> Path:
    where = tmp_path_factory.mktemp("inlined")
    (where / "inlined.c").write_text(SOURCE)
    binary = where / "inlined"
    subprocess.run(
        ["cc", "-std=c11", "-O2", "-g", "-o", str(binary), str(where / "inlined.c")], check=True
    )
    return binary


def _requests(binary: Path) -> bytes:
    """perf's requests for every byte of ``outer``: the address, then its ``,`` sentinel."""
    nm = subprocess.run(["nm", "-S", str(binary)], capture_output=True, text=True, check=True)
    start, size = next(
        (int(f[0], 16), int(f[1], 16)) for f in map(str.split, nm.stdout.splitlines())
        if len(f) == 4 and f[3] == "outer"
    )  # fmt: skip
    return b"".join(b"%016x\n,\n" % address for address in range(start, start + size))


def _binutils(binutils: str, argv: list[str], requests: bytes) -> bytes:
    return subprocess.run([binutils, *argv], input=requests, capture_output=True).stdout


@contextlib.contextmanager
def _serving(log: CommandLog) -> Iterator[dict[str, str]]:
    """A server for this block, listening; yields the environment a report adds. Its
    addr2line processes are in ``log`` once the block ends."""
    with addr2line.serving(log, wanted=True):
        added = addr2line.env(log)
        assert added, "the server did not start"
        socket_path = Path(added["LAB_A2L_SOCKET"])
        deadline = time.monotonic() + 10
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert socket_path.exists(), "the server never listened"
        with addr2line.serving(log, wanted=True):  # a nested block shares the server
            assert addr2line.env(log) == added
        assert addr2line.env(log) == added  # and leaves it running
        assert addr2line.env(CommandLog(log.path.with_name("other.jsonl"))) == {}  # per run
        yield {**os.environ, **added}
    assert addr2line.env(log) == {}  # the outermost block stopped it


def _relay(argv: list[str], requests: bytes, env: dict[str, str]) -> bytes:
    relay = addr2line.RELAY.path()
    done = subprocess.run([str(relay), *argv], input=requests, capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _kept(log_path: Path) -> list[str]:
    """The objects the server's addr2line processes answered for, one entry a process."""
    rows = [json.loads(line) for line in log_path.read_text().splitlines()]
    return [r["argv"][-1] for r in rows if r["argv"][1:5] == ["-a", "-i", "-f", "-e"]]


def test_answers_through_the_server_are_binutils_own(
    tmp_path: Path, inlined: Path, binutils: str
) -> None:
    requests = _requests(inlined)
    expected = _binutils(binutils, ["-e", str(inlined), "-i", "-f"], requests)
    assert b"middle" in expected and b"inner" in expected  # inline chains are asked for
    shared = shutil.which("true")
    assert shared is not None
    probe = b"%016x\n,\n" % 0x1000
    log_path = tmp_path / "commands.jsonl"
    with _serving(CommandLog(log_path)) as env:
        for _ in range(3):  # the shared object's later answers come from what it kept
            assert _relay(["-e", str(inlined), "-i", "-f"], requests, env) == expected
            assert _relay(["-e", shared, "-i", "-f"], probe, env) == _binutils(
                binutils, ["-e", shared, "-i", "-f"], probe
            )
    # from the server, not from binutils started by the relay: a box's object (under the
    # temporary directory) gets an addr2line of its own each report, a shared one one in all
    kept = _kept(log_path)
    assert kept.count(str(inlined)) == 3
    assert kept.count(shared) == 1
    rows = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert any(str(addr2line.SERVER) in row["argv"] for row in rows)


def test_the_relay_hands_on_to_binutils(inlined: Path, binutils: str) -> None:
    requests = _requests(inlined)
    gone = {**os.environ, "LAB_A2L_SOCKET": "/nonexistent/socket", "LAB_A2L_REAL": binutils}
    expected = _binutils(binutils, ["-e", str(inlined), "-i", "-f"], requests)
    assert _relay(["-e", str(inlined), "-i", "-f"], requests, gone) == expected
    # a form perf 6.1 does not use goes to binutils too, with its own arguments
    other = ["-a", "-e", str(inlined), "-f"]
    assert _relay(other, requests, gone) == _binutils(binutils, other, requests)
    unset = {k: v for k, v in gone.items() if k != "LAB_A2L_SOCKET"}
    assert _relay(["-e", str(inlined), "-i", "-f"], requests, unset) == expected


def _ctx(root: Path, client: Path) -> InvocationContext:
    out = root / "evidence"
    out.mkdir(parents=True, exist_ok=True)
    scratch = root / "scratch"
    scratch.mkdir(mode=0o700, exist_ok=True)
    return InvocationContext(
        run_dir=root,
        out_dir=out,
        client_path=client,
        source_path=root / "source.bin",
        source_size=0,
        receiver_port=1,
        decoy_port=2,
        invocation=1,
        log=CommandLog(root / "commands.jsonl", root=root),
        scratch=scratch,
    )


def _without_tip(text: str) -> str:
    # perf ends a report with one of its tips, drawn at random each time
    return re.sub(r"(?m)^# \(Tip: .*\n", "", text)


def test_a_perf_report_through_the_server_prints_what_it_prints_without(
    tmp_path: Path, inlined: Path, binutils: str
) -> None:
    status = PerfCollector.probe()
    require("perf", status.available, status.reason)
    ctx = _ctx(tmp_path, inlined)
    collector = PerfCollector()
    done = run(
        collector.wrap([str(inlined), "40000000"], ctx),
        purpose="the inlined program under perf",
        log=ctx.log,
        accept=None,
    )
    assert done.exit_status == 0
    out = collector.collect(ctx, done)  # perf starts binutils itself
    assert out.error is None, out.error
    plain = (ctx.out_dir / REPORT_FILE).read_text()
    served = [json.loads(line) for line in ctx.log.path.read_text().splitlines()]
    with _serving(ctx.log):
        out = collector.collect(ctx, done)  # the same report, its addr2line the server's
    assert out.error is None, out.error
    assert "(inlined)" in plain
    assert _without_tip((ctx.out_dir / REPORT_FILE).read_text()) == _without_tip(plain)
    assert str(inlined) not in [r["argv"][-1] for r in served]
    assert str(inlined) in _kept(ctx.log.path)  # the server answered, in the run's log
