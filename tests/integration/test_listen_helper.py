"""The listening-socket helper (native/listen/lab-listen.c): the sockets it makes inside a
pass's network namespace are the namespace's (a connection from inside arrives; one from
the host's loopback to the same port does not), and what it refuses is one sentence."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from lab.errors import SandboxError
from lab.sandbox import helpers
from lab.sandbox.netns import NetworkNamespace, name_for

pytestmark = pytest.mark.usefixtures("sandbox_ready")


def _connect_inside(ns: NetworkNamespace, port: int) -> subprocess.CompletedProcess[str]:
    script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    return subprocess.run(
        [*ns.enter_argv(), "bash", "-c", script], capture_output=True, text=True, timeout=10
    )


def test_the_sockets_listen_inside_the_namespace_only() -> None:
    with NetworkNamespace.created(name_for("listen-test")) as ns:
        receiver, decoy = ns.listening_sockets(2)
        with receiver, decoy:
            ports = [s.getsockname()[1] for s in (receiver, decoy)]
            assert all(p > 0 for p in ports) and ports[0] != ports[1]
            assert receiver.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
            done = _connect_inside(ns, ports[0])
            assert done.stdout.strip() == "connected", done.stderr
            conn, _ = receiver.accept()
            conn.close()
            # the host's own loopback has no listener at that port
            with socket.socket() as probe:
                probe.settimeout(2)
                assert probe.connect_ex(("127.0.0.1", ports[0])) != 0


def test_a_given_address_is_bound_and_a_bad_one_is_one_sentence() -> None:
    with NetworkNamespace.created(name_for("listen-test-at")) as ns:
        (fixed,) = ns.listening_sockets(0, at=[("127.0.0.1", 40123)])
        with fixed:
            assert fixed.getsockname() == ("127.0.0.1", 40123)
        with pytest.raises(SandboxError, match=r"no listening socket could be made inside"):
            ns.listening_sockets(0, at=[("not-an-address", 1)])


def test_the_helper_is_built_once_per_source_digest() -> None:
    first = helpers.LISTEN.path()
    assert first.parent.name == f"lab-listen-{helpers.LISTEN.digest()[:16]}"
    assert helpers.LISTEN.path() == first and os.access(first, os.X_OK)
    usage = subprocess.run([str(first)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: lab-listen FD HOST:PORT" in usage.stderr
