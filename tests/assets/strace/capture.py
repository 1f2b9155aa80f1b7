"""Re-capture the strace and bpftrace fixtures of tests/assets/{strace,bpftrace}/ (root).

    python3 tests/assets/strace/capture.py            # needs gcc, strace, bpftrace, root
    python3 tests/assets/strace/capture.py --bpftrace-only
    make -C native && python3 tests/assets/strace/capture.py

Every fixture is the real output of a real program, traced with exactly the command line
the collectors build (``StraceCollector.wrap``; bpftrace as ``BpftraceSession`` runs it,
once per pass in the sandbox), against a loopback receiver started here (HAVE -> the
chosen answer, PUT -> read the payload, OK).
Paths are kept as they were on the capturing machine: the fixtures live under
``/tmp/lab-fixture`` (the source file's name has a space and a ``>`` so that strace's
escaping is exercised), and ``fixtures.json`` records what each capture ran, so the golden
tests know the source path and the expected figures come from the programs' behaviour.
A re-capture changes pids, ports and timings: review the new traces, check that the
behaviour-derived tests in tests/unit/collectors/test_{strace,bpftrace}.py still pass, and
only then refresh the golden ``tests/assets/strace/*.expected.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from lab.collectors.base import InvocationContext  # noqa: E402
from lab.collectors.bpftrace import BpftraceSession  # noqa: E402
from lab.collectors.strace import StraceCollector  # noqa: E402
from lab.host import procs  # noqa: E402

HERE = Path(__file__).resolve().parent
BPF_ASSETS = HERE.parent / "bpftrace"
WORK = Path("/tmp/lab-fixture")
PYTHON = "/usr/bin/python3"

# A client in Python: reads the source twice in 64 KiB os.read calls (plus one pread and
# one read that fails), then asks the receiver HAVE on one connection.
PY_CLIENT = """
import os, socket, sys
src, port = sys.argv[1], int(sys.argv[2])
for _ in range(2):
    fd = os.open(src, os.O_RDONLY)
    while os.read(fd, 65536):
        pass
    os.close(fd)
fd = os.open(src, os.O_RDONLY)
os.pread(fd, 100, 10)
os.close(fd)
d = os.open("/tmp", os.O_RDONLY)
try:
    os.read(d, 10)
except OSError:
    pass
os.close(d)
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"HAVE " + b"ab" * 32 + b" %d\\n" % os.path.getsize(src))
print('{"event": "have", "answer": "%s"}' % s.recv(100).decode().strip(), flush=True)
s.close()
"""

# Every address family and call the destination parser knows, none of them answered.
PY_NETWORK = """
import socket
u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u6.sendto(b"x", ("::1", 47010))
u6.sendmsg([b"ab", b"cd"], [], 0, ("::1", 47011))
u4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u4.sendmsg([b"ab"], [], 0, ("127.0.0.1", 47012))
t6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
for target, sock in ((("::1", 47013), t6),
                     ("/tmp/lab-fixture/no such.sock",
                      socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
                     ("\\0lab-abstract", socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))):
    try:
        sock.connect(target)
    except OSError:
        pass
"""

PY_KILLED = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.read(fd, 4096)
os.kill(os.getpid(), 9)
"""

PY_SLEEPER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
os.read(fd, 4096)
print('{"event": "sleeping"}', flush=True)
time.sleep(30)
"""


class LoopbackReceiver:
    """HAVE -> ``answer``; PUT <hex> <size> -> read size bytes, OK. One request each."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = int(self.sock.getsockname()[1])
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                f = conn.makefile("rb")
                words = f.readline().decode().split()
                if words[:1] == ["HAVE"]:
                    conn.sendall(self.answer.encode() + b"\n")
                elif words[:1] == ["PUT"] and len(words) == 3:
                    left = int(words[2])
                    while left > 0:
                        chunk = f.read(min(left, 65536))
                        if not chunk:
                            break
                        left -= len(chunk)
                    conn.sendall(b"OK\n" if left == 0 else b"ERR short-payload short\n")

    def close(self) -> None:
        self.sock.close()


@contextmanager
def receiver(answer: str) -> Iterator[LoopbackReceiver]:
    rx = LoopbackReceiver(answer)
    try:
        yield rx
    finally:
        rx.close()


def context(name: str, source: Path, port: int) -> InvocationContext:
    out = WORK / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = procs.CommandLog(WORK / "commands.jsonl", root=WORK)
    client = Path(PYTHON)
    return InvocationContext(
        run_dir=WORK,
        out_dir=out,
        client_path=client,
        source_path=source,
        source_size=source.stat().st_size,
        receiver_port=port,
        decoy_port=0,
        invocation=1,
        log=log,
        timeout_s=60,
    )


def make_source(path: Path, size: int) -> None:
    block = bytes(range(256)) * 256
    data = (block * (size // len(block) + 1))[:size]
    path.write_bytes(data)


def run_traced(argv: list[str], ctx: InvocationContext, tool: str) -> procs.Completed:
    return procs.run(
        argv,
        purpose=f"fixture capture ({tool})",
        log=ctx.log,
        stdout=ctx.out_dir / "client.stdout",
        stderr=ctx.out_dir / "client.stderr",
        timeout=ctx.timeout_s,
        accept=None,
        cwd=ctx.out_dir,
    )


def capture_strace(source: Path, program: Path, native: Path | None) -> dict[str, object]:
    tracer = StraceCollector()
    records: dict[str, object] = {}

    def keep(name: str, ctx: InvocationContext, done: procs.Completed) -> None:
        shutil.copyfile(ctx.out_dir / "strace.txt", HERE / f"{name}.txt")
        records[name] = {
            "source": str(source),
            "exit_status": done.exit_status,
            "receiver_port": ctx.receiver_port,
        }

    with receiver("NO") as rx:
        ctx = context("py-client", source, rx.port)
        argv = [PYTHON, "-c", PY_CLIENT, str(source), str(rx.port)]
        keep("python_client", ctx, run_traced(tracer.wrap(argv, ctx), ctx, "strace"))

        ctx = context("threads", source, rx.port)
        argv = [str(program), "--source", str(source), "--receiver", f"127.0.0.1:{rx.port}"]
        argv += ["--threads", "2", "--udp", "47020", "--mmsg", "47021", "--exit", "3"]
        keep("threads", ctx, run_traced(tracer.wrap(argv, ctx), ctx, "strace"))

    ctx = context("network", source, 0)
    keep("network", ctx, run_traced(tracer.wrap([PYTHON, "-c", PY_NETWORK], ctx), ctx, "strace"))

    ctx = context("killed", source, 0)
    argv = tracer.wrap([PYTHON, "-c", PY_KILLED, str(source)], ctx)
    keep("killed", ctx, run_traced(argv, ctx, "strace"))

    # strace itself killed mid-run (SIGKILL to its process group): the trace just stops.
    ctx = context("truncated", source, 0)
    argv = tracer.wrap([PYTHON, "-c", PY_SLEEPER, str(source)], ctx)
    with procs.Background(
        argv,
        purpose="fixture capture (strace killed)",
        log=ctx.log,
        stdout=ctx.out_dir / "client.stdout",
        stop_signal=signal.SIGKILL,
    ):
        time.sleep(1.5)
    shutil.copyfile(ctx.out_dir / "strace.txt", HERE / "truncated.txt")
    records["truncated"] = {"source": str(source), "exit_status": None}

    if native is not None:
        big = WORK / "source 512k.bin"
        make_source(big, 524288)
        for name, answer, behavior in (
            ("native_hash_storm_second", "YES", "hash-storm"),
            ("native_baseline_first", "NO", "baseline"),
        ):
            with receiver(answer) as rx:
                ctx = context(name, big, rx.port)
                argv = [str(native), "--source", str(big), "--receiver", f"127.0.0.1:{rx.port}"]
                argv += ["--behavior", behavior]
                done = run_traced(tracer.wrap(argv, ctx), ctx, "strace")
                shutil.copyfile(ctx.out_dir / "strace.txt", HERE / f"{name}.txt")
                records[name] = {
                    "source": str(big),
                    "exit_status": done.exit_status,
                    "receiver_port": rx.port,
                }
    return records


def capture_bpftrace(source: Path, program: Path, native: Path | None) -> dict[str, object]:
    """One bpftrace session per pass, as the runner runs it: a sandbox cell per capture,
    the session filtered on its invocation cgroups, the client run in the jail."""
    import hashlib

    from lab.collectors.base import PassContext, Window
    from lab.sandbox import Sandbox
    from lab.workloads.backup.decoy import Decoy
    from lab.workloads.backup.receiver import Receiver

    records: dict[str, object] = {}
    sandbox = Sandbox.open(f"fixture-capture-{os.getpid()}")

    def run_pass(name: str, binary: Path, data: bytes, runs: list[list[str]]) -> None:
        with sandbox.pass_cell(name, client=binary, invocations=len(runs)) as cell:
            cell.write_source(data)
            out = WORK / f"bt-{name}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            rx_sock, decoy_sock = cell.listening_sockets(2)
            with (
                Receiver.serving(cell.store, out / "rx.jsonl", sock=rx_sock) as rx,
                Decoy.serving(out / "decoy.jsonl", sock=decoy_sock) as decoy,
            ):
                windows = [
                    Window(i, out / f"inv{i}", cell.group(i).v2, cell.group(i).id)
                    for i in range(1, len(runs) + 1)
                ]
                ctx = PassContext(
                    run_dir=out, out_dir=out, client_path=cell.client, source_path=cell.source,
                    receiver_address=("127.0.0.1", rx.port),
                    decoy_address=("127.0.0.1", decoy.port),
                    log=procs.CommandLog(out / "commands.jsonl", root=out),
                    netns_argv=cell.netns_argv, windows=windows,
                )  # fmt: skip
                session = BpftraceSession()
                session.start(ctx)
                try:
                    for window, extra in zip(windows, runs, strict=True):
                        rx.invocation = window.index
                        argv = [str(cell.client), "--source", str(cell.source)]
                        argv += ["--receiver", rx.address, *extra]
                        cell.run(window.index, argv, wrap=lambda a: a, timeout_s=60,
                                 stdout=out / f"client{window.index}.stdout",
                                 stderr=out / f"client{window.index}.stderr",
                                 purpose=f"fixture capture ({name})")  # fmt: skip
                finally:
                    session.stop()
            for suffix in ("txt", "bt", "symbols.txt"):
                shutil.copyfile(out / f"bpftrace.{suffix}", BPF_ASSETS / f"{name}.{suffix}")
            records[name] = {
                "source": str(cell.source),
                "receiver_port": rx.port,
                "cgroup_ids": [w.cgroup_id for w in windows],
                "source_sha256": hashlib.sha256(data).hexdigest(),
            }

    small = source.read_bytes()
    try:
        run_pass("program", program, small, [["--udp", "47020", "--mmsg", "47021", "--exit", "3"]])
        run_pass("program_no_hash_file", WORK / "traced_program_nohash", small, [["--hashes", "3"]])
        true = Path(shutil.which("true") or "/bin/true").resolve()
        run_pass("true", true, small, [[]])
        if native is not None:
            big = WORK / "source512k.bin"
            make_source(big, 524288)
            data = big.read_bytes()
            pairs = (("native_baseline", "baseline"), ("native_hash_storm", "hash-storm"))
            for name, behavior in pairs:
                run_pass(name, native, data, [["--behavior", behavior]] * 2)
    finally:
        sandbox.close()
    return records


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("run as root: bpftrace needs it")
    WORK.mkdir(parents=True, exist_ok=True)
    source = WORK / "source >1.bin"
    make_source(source, 200000)
    program = WORK / "traced_program"
    c_source = BPF_ASSETS / "traced_program.c"
    procs.run(["gcc", "-O2", "-g", "-pthread", "-o", str(program), str(c_source)], purpose="cc")
    nohash = WORK / "traced_program_nohash"
    procs.run(
        ["gcc", "-O2", "-g", "-pthread", "-DOMIT_HASH_FILE", "-o", str(nohash), str(c_source)],
        purpose="cc",
    )
    native = ROOT / "native" / "backup-client"
    found = native if native.exists() else None
    if "--bpftrace-only" not in sys.argv:
        records = capture_strace(source, program, found)
        (HERE / "fixtures.json").write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
    plain = WORK / "source1.bin"
    make_source(plain, 200000)
    records = capture_bpftrace(plain, program, found)
    (BPF_ASSETS / "fixtures.json").write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
