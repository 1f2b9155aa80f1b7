"""perf.data's own header, read without perf: the sample window ``perf record
--timestamp-boundary`` stores (``HEADER_SAMPLE_TIME``: the first and the last sample's
time, ns) and the clock it was taken on (``HEADER_CLOCKID``; ``-k mono`` makes it
CLOCK_MONOTONIC, the run's time base). ``perf report --header-only`` prints the same two
facts ("time of first sample", "clockid: monotonic (1)").

    window = sample_window(Path("inv1/perf.data"))   # None: no window in this file
    window.first_ns, window.last_ns, window.clock    # ..., ..., "CLOCK_MONOTONIC"
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"PERFILE2"
HEADER = struct.Struct("<8sQQ16s16s16s32s")
SECTION = struct.Struct("<QQ")
#: feature bits (tools/perf/util/header.h)
HEADER_SAMPLE_TIME = 21
HEADER_CLOCKID = 23
CLOCK_NAMES = {
    0: "CLOCK_REALTIME",
    1: "CLOCK_MONOTONIC",
    4: "CLOCK_MONOTONIC_RAW",
    7: "CLOCK_BOOTTIME",
}


@dataclass(frozen=True)
class SampleWindow:
    first_ns: int
    last_ns: int
    #: the clock perf stamped samples with ("CLOCK_MONOTONIC"), or None: perf's own clock
    clock: str | None


def sample_window(path: Path) -> SampleWindow | None:
    """The sample window of a perf.data file, or None when it holds none (recorded without
    ``--timestamp-boundary``, no sample, or not a perf.data file)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEADER.size)
            if len(head) < HEADER.size:
                return None
            magic, _, _, _, data, _, bits = HEADER.unpack(head)
            if magic != MAGIC:
                return None
            data_offset, data_size = SECTION.unpack(data)
            features = int.from_bytes(bits, "little")
            present = [b for b in range(1, 256) if features >> b & 1]
            fh.seek(data_offset + data_size)
            table = fh.read(SECTION.size * len(present))
            sections = {
                bit: SECTION.unpack_from(table, i * SECTION.size)
                for i, bit in enumerate(present)
                if (i + 1) * SECTION.size <= len(table)
            }

            def read(bit: int, size: int) -> bytes | None:
                if bit not in sections or sections[bit][1] < size:
                    return None
                fh.seek(sections[bit][0])
                got = fh.read(size)
                return got if len(got) == size else None

            times = read(HEADER_SAMPLE_TIME, 16)
            clockid = read(HEADER_CLOCKID, 8)
    except OSError:
        return None
    if times is None:
        return None
    first, last = struct.unpack("<QQ", times)
    if first == 0 and last == 0:
        return None
    clock = None
    if clockid is not None:
        (cid,) = struct.unpack("<Q", clockid)
        clock = CLOCK_NAMES.get(cid, f"clockid {cid}")
    return SampleWindow(first, last, clock)
