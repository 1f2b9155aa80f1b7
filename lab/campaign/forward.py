"""The agent's only way out of its network namespace: for each allowed endpoint
(``--agent-network model=HOST:PORT``) a listener made *inside* the namespace at that same
HOST:PORT (so an agent configured for its model needs no change), whose connections the
lab forwards to the real endpoint outside; a packet capture inside the namespace; and the
forwarder's records (connections, bytes each way, timing, the bytes themselves).

    witness = EgressWitness(endpoints, out_dir=rep_dir / "egress", run_dir=run_dir, log=log)
    witness.open(namespace)          # listeners, forwarders, tcpdump inside the namespace
    ...                              # the agent runs in the namespace
    record = witness.close()         # EgressRecord: A1, connections, requests, tokens

Kept per repetition in ``egress/``: ``capture.pcap`` and ``tcpdump.stderr.txt`` (verbatim),
``connections.jsonl`` (one line per forwarded connection) and ``conn-N.up`` / ``conn-N.down``
(the bytes each way, at most :data:`KEEP_BYTES` each).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path

from lab.campaign.modelapi import read_traffic
from lab.collectors.base import PassContext, Window
from lab.collectors.packets import PCAP_FILE, PacketCapture
from lab.collectors.packets_pcap import read_pcap
from lab.errors import LabError
from lab.host import procs
from lab.model.egress import (
    Connection,
    EgressRecord,
    Endpoint,
    PacketView,
    SocketCall,
    Verdict,
    judge_egress,
    stray_calls,
)
from lab.sandbox.netns import NetworkNamespace

#: bytes of each direction of a connection kept (and read for the model API)
KEEP_BYTES = 8 * 1024 * 1024
_CHUNK = 65536
_CONNECT_TIMEOUT_S = 10.0


class _Carried:
    """One forwarded connection's counters and kept bytes."""

    def __init__(self, endpoint: Endpoint, opened: float) -> None:
        self.endpoint = endpoint
        self.opened = opened
        self.closed = opened
        self.up = bytearray()
        self.down = bytearray()
        self.bytes_up = 0
        self.bytes_down = 0
        self.error: str | None = None


def _pump(src: socket.socket, dst: socket.socket, kept: bytearray, carried: _Carried) -> None:
    up = kept is carried.up
    try:
        while chunk := src.recv(_CHUNK):
            dst.sendall(chunk)
            if up:
                carried.bytes_up += len(chunk)
            else:
                carried.bytes_down += len(chunk)
            kept += chunk[: max(0, KEEP_BYTES - len(kept))]
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class _Forwarder:
    """Accepts on a listener inside the namespace, connects to the real endpoint outside."""

    def __init__(self, listener: socket.socket, endpoint: Endpoint, started: float) -> None:
        self.listener = listener
        self.endpoint = endpoint
        self.started = started
        self.carried: list[_Carried] = []
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.sockets: list[socket.socket] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stopping.is_set():
            try:
                inside, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._carry, args=(inside,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _carry(self, inside: socket.socket) -> None:
        carried = _Carried(self.endpoint, time.monotonic())
        self.carried.append(carried)
        self.sockets.append(inside)
        try:
            outside = socket.create_connection(
                (self.endpoint.host, self.endpoint.port), timeout=_CONNECT_TIMEOUT_S
            )
        except OSError as error:
            carried.error = f"the forwarder could not reach {self.endpoint}: {error}"
            inside.close()
            carried.closed = time.monotonic()
            return
        outside.settimeout(None)
        self.sockets.append(outside)
        back = threading.Thread(
            target=_pump, args=(outside, inside, carried.down, carried), daemon=True
        )
        back.start()
        _pump(inside, outside, carried.up, carried)
        back.join()
        carried.closed = time.monotonic()
        inside.close()
        outside.close()

    def stop(self) -> None:
        self.stopping.set()
        self.acceptor.join(timeout=2)
        self.listener.close()
        for thread in self.threads:
            thread.join(timeout=2)
        for sock in self.sockets:  # a connection the agent left open dies with it
            with contextlib.suppress(OSError):
                sock.close()


class EgressWitness:
    def __init__(
        self,
        endpoints: tuple[Endpoint, ...],
        *,
        out_dir: Path,
        run_dir: Path,
        log: procs.CommandLog,
    ) -> None:
        self.endpoints = endpoints
        self.out_dir = out_dir
        self.run_dir = run_dir
        self.log = log
        self.forwarders: list[_Forwarder] = []
        self.capture: PacketCapture | None = None
        self.capture_error: str | None = None
        self.window: Window | None = None
        self.record: EgressRecord | None = None
        self.started = time.monotonic()

    def open(self, namespace: NetworkNamespace) -> None:
        """Listeners at each endpoint inside ``namespace``, their forwarders, the capture."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for endpoint in self.endpoints:
            namespace.add_address(endpoint.host)
        listeners = namespace.listening_sockets(0, at=[(e.host, e.port) for e in self.endpoints])
        self.started = time.monotonic()
        for listener, endpoint in zip(listeners, self.endpoints, strict=True):
            self.forwarders.append(_Forwarder(listener, endpoint, self.started))
        first = self.endpoints[0]
        self.window = Window(index=1, out_dir=self.out_dir / "agent", cgroup_path=None,
                             cgroup_id=None, start=time.time(), end=0.0)  # fmt: skip
        ctx = PassContext(
            run_dir=self.run_dir,
            out_dir=self.out_dir,
            client_path=Path("/bin/sh"),
            log=self.log,
            windows=[self.window],
            source_path=Path("/dev/null"),
            receiver_address=(first.host, first.port),
            decoy_address=("127.0.0.1", 0),
            netns_argv=namespace.enter_argv(),
        )
        capture = PacketCapture()
        try:
            capture.start(ctx)
            self.capture = capture
        except LabError as error:
            self.capture_error = str(error)

    def close(self, calls: list[SocketCall] | None = None) -> EgressRecord:
        """Stop the capture and the forwarders; judge A1 on the packets and ``calls`` (the
        cgroup's connects, None when they were not traced); keep the raw evidence."""
        if self.window is not None:
            self.window.end = time.time()
        packets: list[PacketView] | None = None
        if self.capture is not None:
            self.capture.stop()
            try:
                _, seen = read_pcap((self.out_dir / PCAP_FILE).read_bytes())
                packets = [PacketView(proto=p.proto, src=p.source, dst=p.destination,
                                      flags=p.flags) for p in seen]  # fmt: skip
            except (OSError, ValueError) as error:
                self.capture_error = f"{PCAP_FILE} could not be read: {error}"
        for forwarder in self.forwarders:
            forwarder.stop()
        carried = [c for f in self.forwarders for c in f.carried]
        connections = self._keep(carried)
        allowed = tuple(str(e) for e in self.endpoints)
        verdict, why, disallowed = judge_egress(allowed, packets, self.capture_error)
        verdict, why, disallowed = _with_calls(allowed, calls, verdict, why, disallowed)
        failed = [c for c in connections if c.error]
        if failed and verdict == "pass":
            why += f"; {len(failed)} forwarded connection(s) could not reach the endpoint"
        artifacts = sorted(p.name for p in self.out_dir.iterdir() if p.is_file())
        self.record = EgressRecord(
            allowed=allowed,
            verdict=verdict,
            why=why,
            connections=tuple(connections),
            packets=None if packets is None else len(packets),
            disallowed=disallowed,
            traffic=read_traffic([(bytes(c.up), bytes(c.down)) for c in carried]),
            artifacts=tuple(f"egress/{name}" for name in artifacts),
            attempts=None if calls is None else len(calls),
            calls=tuple((calls or [])[:CALLS_KEPT]),
        )
        return self.record

    def _keep(self, carried: list[_Carried]) -> list[Connection]:
        connections = []
        with (self.out_dir / "connections.jsonl").open("w", encoding="utf-8") as lines:
            for n, c in enumerate(sorted(carried, key=lambda c: c.opened), start=1):
                (self.out_dir / f"conn-{n}.up").write_bytes(bytes(c.up))
                (self.out_dir / f"conn-{n}.down").write_bytes(bytes(c.down))
                record = Connection(
                    endpoint=str(c.endpoint),
                    opened_s=round(c.opened - self.started, 3),
                    duration_s=round(c.closed - c.opened, 3),
                    bytes_up=c.bytes_up,
                    bytes_down=c.bytes_down,
                    error=c.error,
                )
                connections.append(record)
                lines.write(json.dumps({"n": n, **record.to_dict()}, sort_keys=True) + "\n")
        return connections


#: connects kept in the record (all of them are in processes/exec.txt)
CALLS_KEPT = 64


def _with_calls(
    allowed: tuple[str, ...],
    calls: list[SocketCall] | None,
    verdict: Verdict,
    why: str,
    disallowed: tuple[str, ...],
) -> tuple[Verdict, str, tuple[str, ...]]:
    """A1 from the capture, then from the connects: a stray connect fails it; without the
    connect trace a pass from the capture alone is not-observed."""
    if calls is None:
        if verdict == "pass":
            return "not-observed", why + "; but the agent's connects were not traced", ()
        return verdict, why, disallowed
    stray = stray_calls(allowed, calls)
    if not stray:
        return (
            verdict,
            why + f"; none of its cgroup's {len(calls)} connect(s) went elsewhere",
            disallowed,
        )
    words = sorted({c.words() for c in stray})
    said = f"{len(stray)} socket call(s) of the agent's cgroup elsewhere (a connect or "
    said += "sendto to another address, a raw or packet socket): " + ", ".join(words[:8])
    why = said if verdict != "fail" else f"{why}; {said}"
    return "fail", why, tuple(sorted({*disallowed, *(f"{c.call} {c.address}" for c in stray)}))
