"""Re-capture the strace and bpftrace fixtures of tests/assets/{strace,bpftrace}/ (root).

    python3 tests/assets/strace/capture.py            # needs gcc, strace, bpftrace, root
    make -C native && python3 tests/assets/strace/capture.py

Every fixture is the real output of a real program, traced with exactly the command line
the collectors build (``StraceCollector.wrap`` / ``BpftraceCollector.wrap``), against a
loopback receiver started here (HAVE -> the chosen answer, PUT -> read the payload, OK).
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
from lab.collectors.bpftrace import BpftraceCollector  # noqa: E402
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
    records: dict[str, object] = {}
    tracer = BpftraceCollector()

    def run_one(name: str, binary: Path, src: Path, extra: list[str], answer: str) -> None:
        with receiver(answer) as rx:
            ctx = context(f"bt-{name}", src, rx.port)
            ctx.client_path = binary
            argv = [str(binary), "--source", str(ctx.source_path)]
            argv += ["--receiver", f"127.0.0.1:{rx.port}", *extra]
            done = run_traced(tracer.wrap(argv, ctx), ctx, "bpftrace")
            shutil.copyfile(ctx.out_dir / "bpftrace.txt", BPF_ASSETS / f"{name}.txt")
            shutil.copyfile(ctx.out_dir / "bpftrace.bt", BPF_ASSETS / f"{name}.bt")
            symbols = ctx.out_dir / "bpftrace.symbols.txt"
            shutil.copyfile(symbols, BPF_ASSETS / f"{name}.symbols.txt")
            records[name] = {
                "source": str(src),
                "exit_status": done.exit_status,
                "receiver_port": rx.port,
            }

    extra = ["--udp", "47020", "--mmsg", "47021", "--exit", "3"]
    run_one("program", program, source, extra, "NO")
    nohash = WORK / "traced_program_nohash"
    run_one("program_no_hash_file", nohash, source, ["--hashes", "3"], "YES")

    # Why the symbol check exists: bpftrace 0.17 silently skips a uprobe whose symbol is
    # missing and still prints its count() map, as 0. The unpruned template on a binary
    # without hash_file prints "@hash_calls: 0" for a function that does not exist.
    with receiver("YES") as rx:
        ctx = context("bt-unpruned", source, rx.port)
        script = ctx.out_dir / "unpruned.bt"
        template = (ROOT / "probes" / "client.bt").read_text()
        script.write_text(template.replace("__BINARY__", str(nohash)))
        command = f"{nohash} --source {source} --receiver 127.0.0.1:{rx.port}"
        out = ctx.out_dir / "out.txt"
        done = run_traced(["bpftrace", "-o", str(out), str(script), "-c", command], ctx, "bt")
        shutil.copyfile(out, BPF_ASSETS / "unpruned_missing_symbol.txt")
        records["unpruned_missing_symbol"] = {"exit_status": done.exit_status}

    # bpftrace refusing to start: a tracepoint this kernel does not have.
    ctx = context("bt-start-failure", source, 0)
    script = ctx.out_dir / "bad.bt"
    script.write_text(
        template.replace("__BINARY__", str(program)).replace(
            "sys_enter_connect", "sys_enter_no_such_call"
        )
    )
    out = ctx.out_dir / "out.txt"
    done = run_traced(["bpftrace", "-o", str(out), str(script), "-c", "/bin/true"], ctx, "bt")
    shutil.copyfile(out, BPF_ASSETS / "start_failure.txt")
    shutil.copyfile(ctx.out_dir / "client.stderr", BPF_ASSETS / "start_failure.stderr")
    records["start_failure"] = {"exit_status": done.exit_status}

    # A client that never touches a socket: the sum() maps are never printed.
    ctx = context("bt-true", source, 0)
    true = Path(shutil.which("true") or "/bin/true").resolve()
    ctx.client_path = true
    done = run_traced(tracer.wrap([str(true)], ctx), ctx, "bpftrace")
    shutil.copyfile(ctx.out_dir / "bpftrace.txt", BPF_ASSETS / "true.txt")
    shutil.copyfile(ctx.out_dir / "bpftrace.bt", BPF_ASSETS / "true.bt")
    records["true"] = {"exit_status": done.exit_status}

    # bpftrace killed mid-run (SIGKILL to its process group): no END marker, no maps.
    ctx = context("bt-killed", source, 0)
    sleep = Path(shutil.which("sleep") or "/bin/sleep").resolve()
    ctx.client_path = sleep
    argv = tracer.wrap([str(sleep), "30"], ctx)
    with procs.Background(
        argv,
        purpose="fixture capture (bpftrace killed)",
        log=ctx.log,
        stdout=ctx.out_dir / "client.stdout",
        stop_signal=signal.SIGKILL,
    ):
        time.sleep(4)
    shutil.copyfile(ctx.out_dir / "bpftrace.txt", BPF_ASSETS / "killed.txt")
    records["killed"] = {"exit_status": None}

    if native is not None:
        big = WORK / "source512k.bin"  # no space: bpftrace -c splits on spaces
        make_source(big, 524288)
        run_one("native_hash_storm_second", native, big, ["--behavior", "hash-storm"], "YES")
        run_one("native_baseline_first", native, big, ["--behavior", "baseline"], "NO")
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
    records = capture_strace(source, program, found)
    (HERE / "fixtures.json").write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
    plain = WORK / "source1.bin"
    make_source(plain, 200000)
    records = capture_bpftrace(plain, program, found)
    (BPF_ASSETS / "fixtures.json").write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
