"""perf.data's header: the sample window and its clock, from a file laid out as perf
writes it (tools/perf/util/header.c: the file header, the data section, then one section
per feature bit set, in bit order)."""

from __future__ import annotations

import struct
from pathlib import Path

from lab.collectors.perf_header import (
    HEADER,
    HEADER_CLOCKID,
    HEADER_SAMPLE_TIME,
    SECTION,
    sample_window,
)


def _perf_data(path: Path, features: dict[int, bytes]) -> Path:
    data_offset, data_size = HEADER.size, 24
    bits = 0
    for bit in features:
        bits |= 1 << bit
    table_at = data_offset + data_size
    body_at = table_at + SECTION.size * len(features)
    table, bodies = b"", b""
    for bit in sorted(features):
        table += SECTION.pack(body_at + len(bodies), len(features[bit]))
        bodies += features[bit]
    head = HEADER.pack(
        b"PERFILE2",
        HEADER.size,
        136,
        SECTION.pack(0, 0),
        SECTION.pack(data_offset, data_size),
        SECTION.pack(0, 0),
        bits.to_bytes(32, "little"),
    )
    path.write_bytes(head + b"\0" * data_size + table + bodies)
    return path


def test_window_and_monotonic_clock(tmp_path: Path) -> None:
    path = _perf_data(
        tmp_path / "perf.data",
        {
            3: b"hostname",  # an earlier feature shifts the table: bit order matters
            HEADER_SAMPLE_TIME: struct.pack("<QQ", 9402357934513, 9403770864500),
            HEADER_CLOCKID: struct.pack("<Q", 1),
        },
    )
    window = sample_window(path)
    assert window is not None
    assert (window.first_ns, window.last_ns, window.clock) == (
        9402357934513,
        9403770864500,
        "CLOCK_MONOTONIC",
    )


def test_perf_clock_and_absent_window(tmp_path: Path) -> None:
    times = struct.pack("<QQ", 5, 9)
    own = sample_window(_perf_data(tmp_path / "a.data", {HEADER_SAMPLE_TIME: times}))
    assert own is not None and own.clock is None  # perf's own clock: not the time base
    assert sample_window(_perf_data(tmp_path / "b.data", {3: b"host"})) is None
    (tmp_path / "c.data").write_bytes(b"not perf")
    assert sample_window(tmp_path / "c.data") is None
