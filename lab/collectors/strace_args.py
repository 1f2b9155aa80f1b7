"""strace's rendering of one call's arguments read back: C escapes, the argument list split
at top-level commas, a ``-yy`` decorated descriptor (``3</path>``, ``4<TCP:[...]>``), and the
socket addresses an argument list names. Pure; :mod:`lab.collectors.strace_parse` re-exports
these beside the call parser.

    destinations_in('3, {sa_family=AF_INET, sin_port=htons(40001), '
                    'sin_addr=inet_addr("127.0.0.1")}, 16')     # ["127.0.0.1:40001"]
"""

from __future__ import annotations

import re

# Decoded sockets look like "TCP:[...]", "UDPv6:[...]", "UNIX-STREAM:[...]", "socket:[123]";
# files are absolute paths; pipes and anonymous inodes are lower-case "pipe:[...]".
_SOCKET_DECO = re.compile(r"(?:socket|[A-Z][A-Za-z0-9-]*):\[")
_INET = re.compile(
    r"sa_family=AF_INET, sin_port=htons\((?P<port>\d+)\), "
    r'sin_addr=inet_addr\("(?P<addr>[0-9.]+)"\)'
)
_INET6 = re.compile(
    r"sa_family=AF_INET6, sin6_port=htons\((?P<port>\d+)\),.*?"
    r'inet_pton\(AF_INET6, "(?P<addr>[0-9a-fA-F:.]+)"'
)
_UNIX = re.compile(r'sa_family=AF_UNIX, sun_path=(?P<abstract>@)?"(?P<path>(?:[^"\\]|\\.)*)"')
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
# Quoted strings that are part of an address and must survive when buffers are blanked.
_ADDRESS_STRING_PREFIXES = ("sun_path=", "sun_path=@", "inet_addr(", "inet_pton(AF_INET6, ")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "\\": "\\", '"': '"'}


def unescape(text: str) -> str:
    """Undo strace's escaping of a decoded path (``\\76`` for ``>``, ``\\n`` ...)."""

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code[0] == "x":
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _SIMPLE_ESCAPES.get(code, code)

    return _ESCAPE.sub(one, text)


def split_args(text: str) -> list[str]:
    """Split a call's argument text on top-level commas (brackets and strings nest)."""
    args: list[str] = []
    depth = 0
    quoted = False
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "<" and i > start and text[start:i].strip().isdigit():
            # a decoded descriptor "3</path>" or "3<TCP:[a->b]>": skip to its closing ">"
            i = _end_of_decoration(text, i)
            continue
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    tail = text[start:].strip()
    if tail:
        args.append(tail)
    return args


def _end_of_decoration(text: str, lt: int) -> int:
    """Index just past the ``>`` closing the decoration that opens at ``text[lt] == "<"``.

    Paths have their own ``>`` escaped (``\\76``); socket endpoints ("TCP:[a->b]") do not,
    so brackets are balanced first."""
    i = lt + 1
    if _SOCKET_DECO.match(text, i) or text.startswith(("pipe:[", "anon_inode:["), i):
        i = text.index("[", i)
        depth = 0
        while i < len(text):
            if text[i] == "[":
                depth += 1
            elif text[i] == "]":
                depth -= 1
                if depth == 0:
                    break
            i += 1
    end = text.find(">", i)
    return len(text) if end < 0 else end + 1


def descriptor(arg: str) -> tuple[int, str] | None:
    """``"3</tmp/src.bin>"`` -> ``(3, "/tmp/src.bin")``; None for anything else."""
    m = re.match(r"^(\d+)<(.*)>$", arg, re.DOTALL)
    if m is None:
        return None
    return int(m.group(1)), m.group(2)


def is_socket(decoration: str) -> bool:
    return _SOCKET_DECO.match(decoration) is not None


def destinations_in(args: str) -> list[str]:
    """Every socket address in a call's arguments, as ``ip:port``, ``[ip6]:port`` or
    ``unix:/path`` (``unix:@name`` for the abstract namespace). Buffer contents are blanked
    first so that bytes that merely look like an address are not taken for one."""

    def blank(m: re.Match[str]) -> str:
        before = args[: m.start()]
        return m.group(0) if before.endswith(_ADDRESS_STRING_PREFIXES) else '""'

    text = _QUOTED.sub(blank, args)
    found: list[tuple[int, str]] = []
    for m in _INET.finditer(text):
        found.append((m.start(), f"{m.group('addr')}:{m.group('port')}"))
    for m in _INET6.finditer(text):
        found.append((m.start(), f"[{m.group('addr')}]:{m.group('port')}"))
    for m in _UNIX.finditer(text):
        prefix = "@" if m.group("abstract") else ""
        found.append((m.start(), f"unix:{prefix}{unescape(m.group('path'))}"))
    return [d for _, d in sorted(found)]
