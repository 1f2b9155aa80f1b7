"""The exec trace of a cgroup parsed: a real bpftrace 0.17 output (``ls`` failing with
status 2, ``sh -c 'exit 3'``, ``sleep``) and the nasty cases written by hand."""

from __future__ import annotations

from pathlib import Path

from lab.campaign.forward import _with_calls
from lab.collectors.bpftrace_exec import (
    SCRIPT,
    decode_sockaddr,
    parse_exec_trace,
    parse_socket_calls,
    unescape,
)
from lab.model.egress import SocketCall, stray_calls
from tests.conftest import ASSETS


def test_a_real_trace(assets: Path) -> None:
    execs = parse_exec_trace((assets / "bpftrace" / "exec-trace.txt").read_text())
    assert [e.path for e in execs] == ["/usr/bin/ls", "/usr/bin/sh", "/usr/bin/sleep"]
    assert execs[0].argv == ["ls", "/nonexist", "a b"]  # a word with a space kept whole
    assert [e.exit_status for e in execs] == [2, 3, 0]
    assert all(e.parent == 15542 for e in execs)
    assert execs[2].end_ns is not None and execs[2].end_ns - execs[2].start_ns > 100_000_000


def test_a_path_search_an_exec_chain_a_signal_and_a_survivor() -> None:
    text = "\n".join(
        [
            "Attaching 5 probes...",
            "ARGV 10 make\t-C\tnative",  # sh tries /usr/local/bin/make: fails, no EXEC
            "ARGV 10 make\t-C\tnative",
            "EXEC 1000 10 9 /usr/bin/make",
            "ARGV 10 cc\t-c\tx.c",  # make execs cc in place (no fork)
            "EXEC 2000 10 9 /usr/bin/cc",
            "EXIT 3000 10 9",  # killed by SIGKILL
            "EXEC 4000 11 9 /usr/bin/sleep",  # no ARGV seen: the path stands in
        ]
    )
    make, cc, sleep = parse_exec_trace(text)
    assert make.argv == ["make", "-C", "native"] and make.end_ns == 2000
    assert make.exit_status is None and make.signal is None  # its image was replaced
    assert cc.signal == 9 and cc.exit_status is None and cc.end_ns == 3000
    assert sleep.argv == ["/usr/bin/sleep"] and sleep.end_ns is None


def test_the_script_filters_every_probe_by_cgroup() -> None:
    probes = [line for line in SCRIPT.splitlines() if line.startswith("tracepoint:")]
    assert len(probes) == 8
    blocks = [b for b in SCRIPT.split("}\n") if "tracepoint:" in b]
    # every probe filtered by cgroup, but the socket's return: printed only for a raw or
    # packet socket the filtered entry probe marked
    assert all("__FILTER__" in b or "/@raw[tid]/" in b for b in blocks), blocks
    assert "tracepoint:syscalls:sys_exit_socket /@raw[tid]/" in SCRIPT


# bpftrace 0.17's %r of the sockaddr buffers of four calls a Python process made on this
# machine (captured with the same printf formats; the buffers read past addrlen, as the
# real trace's do): a refused inet connect, a refused inet6 one, a unix connect to a
# missing path, and a UDP sendto to port 53 (its return not printed: none seen)
CONNECTS = ASSETS / "bpftrace" / "connects.txt"


def test_connects_are_decoded_by_family_with_their_return() -> None:
    calls = parse_socket_calls(CONNECTS.read_text())
    assert [(c.call, c.family, c.address, c.ret) for c in calls] == [
        ("connect", "inet", "127.0.0.9:9", -111),
        ("connect", "inet6", "[::1]:7", -111),
        ("connect", "unix", "/tmp/nope.sock", -2),
        ("sendto", "inet", "127.0.0.53:53", None),
    ]


def test_a_short_or_abstract_sockaddr() -> None:
    assert decode_sockaddr(b"\x01\x00\x00hidden\x00", 9) == ("unix", "@hidden")
    assert decode_sockaddr(b"\x10\x00" + bytes(10), 12) == ("netlink", "")
    assert decode_sockaddr(b"\x02", 1) == ("unknown", "")
    assert unescape(r"a\x00b") == b"a\x00b"


def test_a1_fails_on_a_connect_elsewhere_even_when_no_packet_left() -> None:
    allowed = ("127.0.0.1:11434",)
    calls = [
        SocketCall(call="connect", pid=2, family="inet", address="127.0.0.1:11434", ret=0),
        SocketCall(call="sendto", pid=2, family="netlink", address="", ret=20),
        SocketCall(call="connect", pid=2, family="unix", address="/nope", ret=-2),
        SocketCall(call="connect", pid=3, family="inet", address="192.0.2.1:80", ret=-101),
    ]
    assert stray_calls(allowed, calls) == [calls[3]]
    # the capture saw only the model's packets: the connect trace alone fails A1
    verdict, why, disallowed = _with_calls(allowed, calls, "pass", "all packets ok", ())
    assert verdict == "fail" and "192.0.2.1:80 → -101" in why
    assert disallowed == ("connect 192.0.2.1:80",)
    assert _with_calls(allowed, calls[:3], "pass", "ok", ())[0] == "pass"
    # no connect trace: a capture's pass is not enough
    assert _with_calls(allowed, None, "pass", "ok", ())[0] == "not-observed"
    assert _with_calls(allowed, None, "fail", "stray", ("tcp x",)) == ("fail", "stray", ("tcp x",))


def test_a_raw_or_packet_socket_is_a_stray_call_with_its_return() -> None:
    # bpftrace's lines for a Python process of this machine's nobody user asking for an
    # AF_INET SOCK_RAW and an AF_PACKET socket (both refused: EPERM), then a plain TCP one
    # (not printed: not raw)
    text = (
        "SOCK socket 14241 14241 2 3\nSOCKRET 14241 -1\n"
        "SOCK socket 14241 14241 17 2\nSOCKRET 14241 -1\n"
    )
    calls = parse_socket_calls(text)
    assert [(c.call, c.family, c.address, c.ret) for c in calls] == [
        ("socket", "inet", "raw", -1),
        ("socket", "packet", "packet", -1),
    ]
    assert stray_calls(("127.0.0.1:11434",), calls) == calls
    verdict, why, disallowed = _with_calls(("127.0.0.1:11434",), calls, "pass", "ok", ())
    assert verdict == "fail" and "socket inet raw → -1" in why
    assert disallowed == ("socket packet", "socket raw")
