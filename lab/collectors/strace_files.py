"""What a ``strace -f -yy`` trace says a process tree did to the file system: every file or
directory it created, opened for writing, renamed, linked or removed, each with the path
the kernel resolved where the trace holds it and the trace's own lines, verbatim. Pure: text
in, records out; ``lab.collectors.strace`` owns the command line (``file_trace_argv``).

    calls, _ = iter_syscalls(text)
    effects = file_effects(calls)
    [verbatim(text, e) for e in effects if not inside(e.path, "/w/root")]

An ``open``/``openat``/``openat2``/``creat`` that succeeded returns a descriptor that ``-yy``
decodes from ``/proc/PID/fd``: the file the kernel really opened, after every symlink
(``witness == "descriptor"``). The other calls (``mkdirat``, ``renameat2``, ``linkat``,
``symlinkat``, ``unlinkat`` …) return no descriptor; their path is the directory
descriptor's decoded path joined with the name they were given, normalised lexically
(``witness == "lexical"``): a symlink in the name is not resolved, and the caller must say
which of its symlinks lead where (``redirect``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lab.collectors.strace_parse import FORK_CALLS, Syscall, split_args, unescape

#: open flags that make an open a write (or a creation)
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
#: call -> (index of its path, index of its flags, or None when it always writes)
OPEN_CALLS: dict[str, tuple[int, int | None]] = {
    "open": (0, 1),
    "openat": (1, 2),
    "openat2": (1, 2),
    "creat": (0, None),
}
#: call -> (what it does, [(index of the directory descriptor or None, index of the path)])
PATH_CALLS: dict[str, tuple[str, tuple[tuple[int | None, int], ...]]] = {
    "mkdir": ("created", ((None, 0),)),
    "mkdirat": ("created", ((0, 1),)),
    "mknod": ("created", ((None, 0),)),
    "mknodat": ("created", ((0, 1),)),
    "symlink": ("linked", ((None, 1),)),
    "symlinkat": ("linked", ((1, 2),)),
    "link": ("linked", ((None, 0), (None, 1))),
    "linkat": ("linked", ((0, 1), (2, 3))),
    "rename": ("renamed", ((None, 0), (None, 1))),
    "renameat": ("renamed", ((0, 1), (2, 3))),
    "renameat2": ("renamed", ((0, 1), (2, 3))),
    "unlink": ("removed", ((None, 0),)),
    "unlinkat": ("removed", ((0, 1),)),
    "rmdir": ("removed", ((None, 0),)),
    "truncate": ("written", ((None, 0),)),
}
_DIRFD = re.compile(r"^(?:-?\d+|AT_FDCWD)<(?P<path>.*)>$", re.DOTALL)
_STRING = re.compile(r'^"(?P<text>(?:[^"\\]|\\.)*)"(?:\.\.\.)?$')
_LINE_KEY = re.compile(r"^(?P<pid>\d+)\s+(?P<ts>\d+\.\d+)\s")


@dataclass(frozen=True)
class FileEffect:
    """One successful call that changed the file system (or opened a file to write)."""

    pid: int
    call: str
    #: "opened for writing", "created", "linked", "renamed", "removed" or "written"
    action: str
    #: the absolute path it touched: the kernel's (``descriptor``) or a lexical join
    path: str
    #: "descriptor" (the returned fd, decoded by -yy) or "lexical" (dirfd + name)
    witness: str
    #: when the call started (the trace's -ttt stamp): with ``pid``, finds its lines
    ts: float


def inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def redirect(path: str, links: Mapping[str, str]) -> str:
    """``path`` with the longest symlink of ``links`` (link path -> where it leads) that
    prefixes it, at a component boundary, replaced by its target."""
    for link in sorted(links, key=len, reverse=True):
        if path == link or path.startswith(link + "/"):
            return posixpath.normpath(links[link] + path[len(link) :])
    return path


def family(calls: Sequence[Syscall], roots: Iterable[int]) -> set[int]:
    """``roots`` and every process or thread they (and theirs) created."""
    found = set(roots)
    for call in calls:  # in order of completion: a child's clones come after its own
        if call.pid in found and call.name in FORK_CALLS and call.ret and call.ret > 0:
            found.add(call.ret)
    return found


def exec_pids(calls: Sequence[Syscall], argv_prefix: Sequence[str]) -> list[int]:
    """Pids whose successful ``execve`` had an argv beginning with ``argv_prefix``
    (matched from its second word on: the first is the program's path, which strace may
    have cut short with ``"..."``)."""
    rest = "".join(f', "{re.escape(w)}"' for w in argv_prefix[1:])
    pattern = re.compile(r'^\["(?:[^"\\]|\\.)*"(?:\.\.\.)?' + rest + r"(?:,|\])")
    found = []
    for call in calls:
        if call.name != "execve" or call.ret != 0:
            continue
        args = split_args(call.args)
        if len(args) > 1 and pattern.match(args[1]):
            found.append(call.pid)
    return found


def verbatim(text: str, effect: FileEffect) -> tuple[str, ...]:
    """The trace's lines for ``effect``'s call: its line, or its unfinished line and the
    same process's next resumption of that call."""
    key = f"{effect.pid} "
    stamp = f"{effect.ts:.6f}"
    lines: list[str] = []
    for line in text.splitlines():
        if not lines:
            m = _LINE_KEY.match(line)
            starts = m is not None and line.startswith(key) and m.group("ts") == stamp
            if starts and f"{effect.call}(" in line:
                lines.append(line)
                if not line.endswith("<unfinished ...>"):
                    break
        elif line.startswith(key) and f"<... {effect.call} resumed>" in line:
            lines.append(line)
            break
    return tuple(lines)


def _path_arg(args: list[str], dirfd_at: int | None, path_at: int) -> str | None:
    if len(args) <= path_at:
        return None
    m = _STRING.match(args[path_at])
    if m is None:
        return None
    name = unescape(m.group("text"))
    if name.startswith("/"):
        return posixpath.normpath(name)
    base = "/"  # without a decoded directory the path stays relative to nothing known
    if dirfd_at is not None and len(args) > dirfd_at:
        d = _DIRFD.match(args[dirfd_at])
        if d is None:
            return None
        base = unescape(d.group("path"))
    elif dirfd_at is None:
        return None  # a relative path of mkdir(2) and kin: the cwd is not in the call
    return posixpath.normpath(posixpath.join(base, name))


def _writes(call: Syscall, args: list[str]) -> bool:
    flags_at = OPEN_CALLS[call.name][1]
    if flags_at is None:
        return True
    flags = args[flags_at] if len(args) > flags_at else ""
    return any(flag in flags for flag in WRITE_FLAGS)


def file_effects(calls: Sequence[Syscall]) -> list[FileEffect]:
    """Every successful call in ``calls`` that created, opened for writing, renamed,
    linked, removed or truncated something (``verbatim`` finds its lines in the trace).

    A call that failed changed nothing and is left out; so is one the trace never saw
    return (its process died inside it). A path strace could not resolve (an undecoded
    directory descriptor) is kept as ``"?"`` followed by the name it was given, which
    ``inside`` never takes for a path under a root."""
    effects: list[FileEffect] = []
    for call in calls:
        if call.ret is None or call.ret < 0:
            continue
        args = split_args(call.args)
        if call.name in OPEN_CALLS and _writes(call, args):
            path_at = OPEN_CALLS[call.name][0]
            if call.decoded is not None and call.decoded.startswith("/"):
                path, witness = unescape(call.decoded), "descriptor"
            else:
                dirfd_at = 0 if call.name in ("openat", "openat2") else None
                found = _path_arg(args, dirfd_at, path_at)
                path, witness = (found or f"?{args[path_at : path_at + 1]}"), "lexical"
            effects.append(
                FileEffect(call.pid, call.name, "opened for writing", path, witness, call.ts)
            )
        elif call.name in PATH_CALLS:
            action, places = PATH_CALLS[call.name]
            for dirfd_at, path_at in places:
                found = _path_arg(args, dirfd_at, path_at)
                path = found or f"?{args[path_at : path_at + 1]}"
                effects.append(FileEffect(call.pid, call.name, action, path, "lexical", call.ts))
    return effects
