"""Reading a scenario file as untrusted input: bounded, regular, strict YAML.

    text = read_bounded(Path("scenarios/baseline.yaml"))   # ScenarioError on anything odd
    data = parse_strict(text, Path("scenarios/baseline.yaml"))

A scenario file may come from anyone (``--scenario-dir``), so before its content is trusted:

* only a regular file is read, opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with
  ``fstat`` on the open descriptor: a symbolic link (to ``/dev/zero``, say), a FIFO or a
  device is refused without blocking, and a file larger than :data:`MAX_BYTES` is refused
  before it is read;
* the YAML loader is PyYAML's safe loader without anchors, aliases and merge keys (no
  billion-laughs expansion), with unique keys (a repeated key is an error, not "last one
  wins") and a nesting limit (no recursion past :data:`MAX_DEPTH`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from lab.errors import ScenarioError

#: the shipped scenario files are under 2 KiB; 64 KiB leaves room and bounds the work
MAX_BYTES = 64 * 1024
#: the shipped files nest 5 levels deep (top, expect, findings, a finding, a list value)
MAX_DEPTH = 12

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def read_bounded(path: Path, *, limit: int = MAX_BYTES) -> str:
    """The text of a regular file of at most ``limit`` bytes, without following a link."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file; list scenarios/ for names.") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ScenarioError(
                f"{path}: is a symbolic link; a scenario file must be a regular file "
                "(copy the file instead of linking it)."
            ) from None
        raise ScenarioError(f"{path}: cannot be read ({exc.strerror}).") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise ScenarioError(
                f"{path}: is {kind}, not a regular file; a scenario must be a YAML file."
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit and info.st_size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if max(size, info.st_size) > limit:
            raise ScenarioError(
                f"{path}: is {max(size, info.st_size):,} bytes, more than the {limit:,} a "
                "scenario file may have; shorten it."
            )
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot be read ({exc.strerror}).") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{path}: is not UTF-8 text (byte {exc.start}); save it as UTF-8."
        ) from None


def printable(value: Any, limit: int = 60) -> str:
    """``value`` as it may appear in a one-sentence message: one line, bounded, ASCII-safe."""
    text = "".join(c if c.isprintable() else "?" for c in str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Refused(yaml.YAMLError):
    """YAML that the strict loader refuses, with where it is."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.mark = mark


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """Mapping construction that refuses merge keys and a key written twice."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise Refused("merge keys ('<<') are not allowed", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the safe constructor reports an unhashable key itself
            if key in seen:
                raise Refused(
                    f"key '{printable(key)}' appears twice (first at line {seen[key] + 1}); "
                    "keep one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


class StrictLoader(_UniqueKeys, yaml.SafeLoader):
    """``yaml.SafeLoader`` without anchors, aliases or merge keys; unique keys; bounded depth."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise Refused(
                "anchors and aliases are not allowed; write the value out", event.start_mark
            )
        if self._depth >= MAX_DEPTH:
            raise Refused(f"nesting deeper than {MAX_DEPTH} levels", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_FAST = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


class _StrictConstructing(_UniqueKeys, _FAST):  # type: ignore[misc,valid-type]
    """libyaml's parser (C) with the strict loader's mapping construction (unique keys, no
    merge keys); anchors, aliases and depth are refused beforehand by ``_refuse_events``."""


def _refuse_events(text: str) -> None:
    """What ``StrictLoader.compose_node`` refuses (anchors, aliases, nesting deeper than
    ``MAX_DEPTH``), read from libyaml's event stream."""
    depth = 0
    for event in yaml.parse(text, Loader=_StrictConstructing):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise Refused(
                "anchors and aliases are not allowed; write the value out", event.start_mark
            )
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)) and depth >= MAX_DEPTH:
            raise Refused(f"nesting deeper than {MAX_DEPTH} levels", event.start_mark)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def parse_strict(text: str, path: Path) -> Any:
    """The YAML document in ``text``, or one sentence naming ``path`` and the position.

    With libyaml (PyYAML's C parser, Debian's and PyPI's builds carry it) the text is
    parsed in C, about six times faster than ``StrictLoader`` in pure Python; the same
    things are refused with the same sentences either way."""
    try:
        if not yaml.__with_libyaml__:
            return yaml.load(text, Loader=StrictLoader)
        _refuse_events(text)
        return yaml.load(text, Loader=_StrictConstructing)
    except Refused as exc:
        raise ScenarioError(f"{path}: {_where(exc.mark)}{exc.problem}.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        if "nesting depth" in problem:
            # libyaml builds with a nesting limit of their own (1000) meet it first: their
            # scanner reads up to 1024 characters ahead of the first event it hands out
            raise ScenarioError(
                f"{path}: {_where(mark)}nesting deeper than {MAX_DEPTH} levels."
            ) from None
        where = f" at {_where(mark).removesuffix(': ')}" if mark else ""
        raise ScenarioError(f"{path}: is not valid YAML{where} ({problem}).") from None


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
