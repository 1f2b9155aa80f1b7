"""Wire protocol v1 (docs/protocol.md): parsing and formatting of its lines. No I/O.

request = parse_request(b"HAVE 9f86...08 524288\\n", max_size=256 << 20)
assert request.verb == "HAVE"
format_error("digest-mismatch", "payload digest differs")  # b"ERR digest-mismatch ...\\n"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: every protocol line, newline included, is at most this long (protocol v1)
MAX_LINE = 256
DEFAULT_MAX_SIZE = 256 * 1024 * 1024

ERROR_CODES = (
    "bad-request",
    "too-large",
    "digest-mismatch",
    "short-payload",
    "timeout",
    "line-too-long",
    "internal",
    # compatible extension of v1 (docs/protocol.md "Versioning"): the receiver is at capacity
    "busy",
)

_HEX64 = re.compile(rb"[0-9a-f]{64}")
#: any length: a size too long for the receiver is ``too-large``, not malformed (the line
#: limit bounds the digits)
_SIZE = re.compile(rb"0|[1-9][0-9]*")


class ProtocolViolation(Exception):
    """A request line that protocol v1 does not allow; ``code`` is the ERR code to send."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


@dataclass(frozen=True)
class Request:
    verb: str  # "HAVE" or "PUT"
    digest: str
    size: int


def parse_request(line: bytes, *, max_size: int = DEFAULT_MAX_SIZE) -> Request:
    """Parse one request line (with or without its trailing newline).

    The advertised digest is only syntax-checked here: it is never trusted, the receiver
    recomputes it over the payload before committing.
    """
    if len(line) > MAX_LINE:
        raise ProtocolViolation("line-too-long", f"request line exceeds {MAX_LINE} bytes")
    if line.endswith(b"\n"):
        line = line[:-1]
    if b"\r" in line or b"\x00" in line:
        raise ProtocolViolation("bad-request", "request line contains CR or NUL")
    try:
        line.decode("ascii")
    except UnicodeDecodeError:
        raise ProtocolViolation("bad-request", "request line is not ASCII") from None
    parts = line.split(b" ")
    if len(parts) != 3:
        raise ProtocolViolation("bad-request", "expected '<VERB> <sha256-hex> <size>'")
    verb, digest, size = parts
    if verb not in (b"HAVE", b"PUT"):
        raise ProtocolViolation("bad-request", "unknown verb; expected HAVE or PUT")
    if not _HEX64.fullmatch(digest):
        raise ProtocolViolation("bad-request", "digest must be 64 lowercase hex digits")
    if not _SIZE.fullmatch(size):
        raise ProtocolViolation("bad-request", "size must be a decimal integer")
    value = int(size)
    if value > max_size:
        raise ProtocolViolation("too-large", f"size exceeds the receiver's limit of {max_size}")
    return Request(verb=verb.decode(), digest=digest.decode(), size=value)


def format_error(code: str, text: str) -> bytes:
    assert code in ERROR_CODES, code
    line = f"ERR {code} {text}"
    clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in line)
    return clean[: MAX_LINE - 1].encode("ascii") + b"\n"


YES = b"YES\n"
NO = b"NO\n"
OK = b"OK\n"
