from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.workloads.backup import protocol

DIGEST = "a" * 64


def test_parses_have_and_put() -> None:
    r = protocol.parse_request(f"HAVE {DIGEST} 524288\n".encode())
    assert (r.verb, r.digest, r.size) == ("HAVE", DIGEST, 524288)
    r = protocol.parse_request(f"PUT {DIGEST} 0".encode())
    assert (r.verb, r.size) == ("PUT", 0)


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"HELLO\n", "bad-request"),
        (b"HAVE abc 1\n", "bad-request"),
        (f"HAVE {'A' * 64} 1\n".encode(), "bad-request"),  # uppercase hex is not v1
        (f"HAVE {DIGEST} -1\n".encode(), "bad-request"),
        (f"HAVE {DIGEST} 01\n".encode(), "bad-request"),
        (f"HAVE {DIGEST} 1 2\n".encode(), "bad-request"),
        (f"PUT {DIGEST} 1\r\n".encode(), "bad-request"),
        (f"PUT  {DIGEST} 1\n".encode(), "bad-request"),
        (f"PUT {DIGEST} 99999999999\n".encode(), "too-large"),
        # 17 digits and more were once 'bad-request'; a size is too large, not malformed
        (f"PUT {DIGEST} {'9' * 17}\n".encode(), "too-large"),
        (f"HAVE {DIGEST} 1{'0' * 180}\n".encode(), "too-large"),
        (b"PUT " + b"x" * 300 + b"\n", "line-too-long"),
        (b"HAVE \xff\n", "bad-request"),
    ],
)
def test_rejects(line: bytes, code: str) -> None:
    with pytest.raises(protocol.ProtocolViolation) as info:
        protocol.parse_request(line, max_size=1 << 30)
    assert info.value.code == code


def test_error_line_is_bounded_ascii() -> None:
    line = protocol.format_error("bad-request", "é" * 1000)
    assert line.endswith(b"\n") and len(line) <= protocol.MAX_LINE
    line.decode("ascii")


@given(st.binary(max_size=400))
def test_parser_never_crashes(data: bytes) -> None:
    try:
        r = protocol.parse_request(data)
    except protocol.ProtocolViolation as exc:
        assert exc.code in protocol.ERROR_CODES
    else:
        assert r.verb in ("HAVE", "PUT") and len(r.digest) == 64 and r.size >= 0
