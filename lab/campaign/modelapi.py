"""Requests and tokens of a model API, read from the bytes the forwarder carried: an
OpenAI-compatible API (``/v1/chat/completions``, ``/v1/completions``; ``usage.prompt_tokens``
and ``usage.completion_tokens``) or Ollama's (``/api/chat``, ``/api/generate``;
``prompt_eval_count`` and ``eval_count``), plain HTTP/1.x, keep-alive, chunked and streamed
(SSE ``data:`` lines or newline-delimited JSON) answers. Pure: no I/O.

    traffic = read_traffic([(up_bytes, down_bytes), ...])   # one pair per connection
    traffic.readable, traffic.requests, traffic.prompt_tokens

A stream that starts with a TLS record is "tls": not readable, nothing counted (None, never
0). Tokens are summed over every answer that reports them; an answer that reports none
leaves the sum as it is, and the sum is None when no answer reported any.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from lab.model.egress import ModelTraffic

#: the API paths counted as model requests
API_PATHS = ("/v1/chat/completions", "/v1/completions", "/api/chat", "/api/generate")
_TLS_HANDSHAKE = 0x16


def _split_head(data: bytes) -> tuple[bytes, bytes] | None:
    head, sep, rest = data.partition(b"\r\n\r\n")
    return (head, rest) if sep else None


def _headers(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return lines[0], fields


def _body(fields: dict[str, str], rest: bytes, *, response: bool) -> tuple[bytes, bytes]:
    """(body, what follows it) by Content-Length, chunked, or (an answer) to the close."""
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body, pos = b"", 0
        while True:
            line_end = rest.find(b"\r\n", pos)
            if line_end < 0:
                return body, b""
            size = int(rest[pos:line_end].split(b";")[0] or b"0", 16)
            start = line_end + 2
            if size == 0:
                end = rest.find(b"\r\n\r\n", line_end)
                return body, rest[end + 4 :] if end >= 0 else b""
            body += rest[start : start + size]
            pos = start + size + 2
    if "content-length" in fields:
        n = int(fields["content-length"])
        return rest[:n], rest[n:]
    return (rest, b"") if response else (b"", rest)


def _messages(data: bytes, *, response: bool) -> list[tuple[str, bytes]]:
    """The HTTP messages of one direction: (start line, body)."""
    found: list[tuple[str, bytes]] = []
    while data:
        split = _split_head(data)
        if split is None:
            break
        start, fields = _headers(split[0])
        try:
            body, data = _body(fields, split[1], response=response)
        except ValueError:
            break
        found.append((start, body))
    return found


def _json_objects(body: bytes) -> list[dict[str, Any]]:
    """The body as one JSON object, or its SSE ``data:`` / NDJSON lines' objects."""
    text = body.decode("utf-8", "replace").strip()
    try:
        whole = json.loads(text)
        return [whole] if isinstance(whole, dict) else []
    except ValueError:
        pass
    objects = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if not line or line == "[DONE]":
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            objects.append(item)
    return objects


def usage_of(body: bytes) -> tuple[int, int] | None:
    """(prompt, completion) tokens an answer reports, or None when it reports none."""
    prompt = completion = 0
    seen = False
    for obj in _json_objects(body):
        usage = obj.get("usage")
        if isinstance(usage, dict) and "prompt_tokens" in usage:
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
            seen = True
        elif "prompt_eval_count" in obj or "eval_count" in obj:
            prompt += int(obj.get("prompt_eval_count") or 0)
            completion += int(obj.get("eval_count") or 0)
            seen = True
    return (prompt, completion) if seen else None


def read_traffic(streams: list[tuple[bytes, bytes]]) -> ModelTraffic:
    """Every connection's (up, down) bytes -> what they show of a model API."""
    if not any(up for up, _ in streams):
        return ModelTraffic(readable="none", requests=0)
    if any(up[:1] and up[0] == _TLS_HANDSHAKE for up, _ in streams):
        return ModelTraffic(readable="tls")
    paths: Counter[str] = Counter()
    requests = 0
    prompt = completion = 0
    reported = False
    http = False
    for up, down in streams:
        asked = _messages(up, response=False)
        answers = _messages(down, response=True)
        http = http or bool(asked)
        for start, _ in asked:
            parts = start.split(" ")
            path = parts[1].split("?")[0] if len(parts) > 1 else ""
            if path in API_PATHS:
                paths[path] += 1
                requests += 1
        for _, body in answers:
            usage = usage_of(body)
            if usage is not None:
                prompt, completion = prompt + usage[0], completion + usage[1]
                reported = True
    if not http:
        return ModelTraffic(readable="other")
    return ModelTraffic(
        readable="http",
        requests=requests,
        prompt_tokens=prompt if reported else None,
        completion_tokens=completion if reported else None,
        paths=dict(sorted(paths.items())),
    )
