"""timeline.jsonl on one time base: the offset's measurement and conversion, the header
row, sorting, the bounded flood, and client lines stamped as they are read."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from lab.host.clock import TIME_BASE, ClockOffset, measure_offset
from lab.run.timeline import MONOTONIC, REALTIME, Sighting, Timeline, read_time_base
from lab.run.timeline_sources import KEPT, bounded, bpftrace_sightings, strace_sightings
from lab.sandbox.output import LINES_TIMED, CappedStream


def test_offset_is_realtime_minus_monotonic_within_its_bracket() -> None:
    off = measure_offset()
    mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    real = time.clock_gettime_ns(time.CLOCK_REALTIME)
    # the readings just taken agree with the measured offset to well under a millisecond
    assert abs((real - mono) - off.offset_ns) < 1_000_000
    assert 0 <= off.uncertainty_ns < 1_000_000
    assert off.at_ns <= mono


def test_conversion_interpolates_and_the_header_names_the_base(tmp_path: Path) -> None:
    tl = Timeline(tmp_path / "timeline.jsonl")
    tl.start = ClockOffset(offset_ns=1_000, uncertainty_ns=5, at_ns=100)
    tl.end = ClockOffset(offset_ns=1_100, uncertainty_ns=7, at_ns=300)
    assert tl.offset_at(100 + 1_000) == 1_000
    assert tl.offset_at(200 + 1_000) == 1_050  # half way: half the drift
    assert tl.offset_at(10_000) == 1_100  # held past the end
    assert tl.uncertainty_ns == 7 + 100
    tl.add("runner", "client-start", 250, scenario="s")
    tl.add_realtime("verifier", "check", 300 + 1_000)  # at the end: the end offset
    rows = tl.rows()
    head = rows[0]
    assert head["event"] == "time-base" and head["time_base"] == TIME_BASE
    assert [r["t_ns"] for r in rows[1:]] == [200, 250]
    assert rows[1]["offset_ns"] == 1_100 and rows[1]["source"] == "verifier"


def test_flush_writes_sorted_rows_and_reopening_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "timeline.jsonl"
    tl = Timeline(path)
    now = time.monotonic_ns()
    tl.add("verifier", "check", now + 30)
    tl.add("runner", "client-start", now + 10)
    tl.add_realtime("packets", "SYN", time.time_ns())
    tl.flush()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0]["event"] == "time-base"
    assert [r["t_ns"] for r in rows] == sorted(r["t_ns"] for r in rows)
    assert all(isinstance(r["t_ns"], int) for r in rows)
    base = read_time_base(path)
    assert base is not None and base["time_base"] == TIME_BASE
    again = Timeline(path)
    again.flush()
    assert len(path.read_text().splitlines()) == len(rows)
    assert again.start == tl.start


def test_a_flood_is_bounded_to_a_count_row() -> None:
    rows = [Sighting("bpftrace", "hash_file", MONOTONIC, i, str(i), "ns") for i in range(256)]
    rows.append(Sighting("bpftrace", "connect", MONOTONIC, 999, "999", "ns"))
    kept = bounded(rows)
    hashes = [r for r in kept if r.event == "hash_file"]
    assert len(hashes) == KEPT + 1
    assert hashes[-1].fields["summarised"] == 256 - KEPT and hashes[-1].own_ns == 255
    assert any(r.event == "connect" for r in kept)


def test_bpftrace_rows_are_on_its_own_monotonic_nanoseconds() -> None:
    text = (
        "Attaching 12 probes...\nlab: attached\n"
        "8663044088283 cg=14446 pid=10857 hash_file\n"
        "8663056414175 cg=14446 pid=10857 tcp-connect family=inet addr=127.0.0.1 port=34359\n"
    )
    rows = bpftrace_sightings(text)
    assert [(r.event, r.own_ns, r.clock) for r in rows] == [
        ("hash_file", 8663044088283, MONOTONIC),
        ("tcp-connect", 8663056414175, MONOTONIC),
    ]
    assert rows[1].fields["port"] == "34359"


def test_strace_rows_keep_the_clients_exec_connect_send_and_exit() -> None:
    text = (
        '7 1796218104.502204 execve("/bin/client", ["client"], 0x1 /* 3 vars */) = 0 <0.0004>\n'
        '7 1796218104.602204 openat(AT_FDCWD, "/x", O_RDONLY) = 3</x> <0.00002>\n'
        "7 1796218104.702204 connect(3<TCP:[1]>, {sa_family=AF_INET, sin_port=htons(9), "
        'sin_addr=inet_addr("127.0.0.1")}, 16) = 0 <0.00005>\n'
        '7 1796218104.802204 write(3<TCP:[127.0.0.1:5->127.0.0.1:9]>, "HAVE", 4) = 4 <0.00001>\n'
        '7 1796218104.812204 write(1<pipe:[5]>, "{}", 2) = 2 <0.00001>\n'
        "7 1796218104.902204 exit_group(0)           = ?\n"
        "7 1796218104.902304 +++ exited with 0 +++\n"
    )
    rows = strace_sightings(text, None, 0)
    assert [r.event for r in rows] == ["execve", "connect", "write", "exit_group"]
    assert rows[0].own_ns == 1796218104502204000 and rows[0].clock == REALTIME
    assert rows[1].fields["destinations"] == ["127.0.0.1:9"]


def test_stdout_lines_are_stamped_when_read_not_at_exit(tmp_path: Path) -> None:
    r, w = os.pipe()
    stream = CappedStream(r, tmp_path / "client.stdout")
    stream.start()
    os.write(w, b'{"event": "start"}\n{"event": "ha')
    time.sleep(0.05)
    os.write(w, b'shed"}\n')
    os.close(w)
    record = stream.join(5.0)
    (n0, t0, l0), (n1, t1, l1) = record.line_times
    assert (n0, l0, n1, l1) == (0, b'{"event": "start"}', 1, b'{"event": "hashed"}')
    assert t1 - t0 >= 40_000_000  # the second line was read 50 ms after the first


def test_a_flood_of_lines_keeps_the_first_and_last_times(tmp_path: Path) -> None:
    r, w = os.pipe()
    stream = CappedStream(r, tmp_path / "client.stdout", head=4096, tail=4096)
    stream.start()

    def write() -> None:
        for i in range(50):
            os.write(w, b"".join(b"line %d\n" % (i * 1000 + j) for j in range(1000)))
        os.close(w)

    writer = threading.Thread(target=write)
    writer.start()
    record = stream.join(30.0)
    writer.join()
    numbers = [n for n, _, _ in record.line_times]
    assert len(numbers) == 2 * LINES_TIMED
    assert numbers[:3] == [0, 1, 2] and numbers[-1] == 49_999
    assert record.line_times[-1][2] == b"line 49999"
