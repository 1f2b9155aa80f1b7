"""The bpftrace collector: script rendering, golden parses of real bpftrace 0.17 session
output (tests/assets/bpftrace/, captured by tests/assets/strace/capture.py in the sandbox, one
session per pass filtered on the invocations' cgroups) and failed sessions."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lab.collectors import bpftrace
from lab.collectors.base import PassContext, Window
from lab.collectors.bpftrace import BpftraceSession
from lab.collectors.bpftrace_parse import COUNTER_KEYS, parse_bpftrace, summarize
from lab.collectors.bpftrace_script import (
    DEFAULT_SCRIPT,
    RenderedScript,
    cgroup_filter,
    check_attach_path,
    defined_counters,
    function_symbols,
    render_script,
    script_uprobes,
    template_uprobes,
)
from lab.errors import CollectorError
from lab.host import procs
from tests.unit.collectors.helpers import SIZE, completed

NATIVE_SIZE = 524288
TEMPLATE = DEFAULT_SCRIPT.read_text()
PID = "pid == cpid"


@pytest.fixture
def fixtures(assets: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((assets / "bpftrace" / "fixtures.json").read_text())
    return loaded


def read(assets: Path, name: str) -> str:
    return (assets / "bpftrace" / name).read_text()


def summaries_of(assets: Path, fixtures: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """What stop() would report for a captured session: one summary per invocation."""
    script = read(assets, f"{name}.bt")
    absent = [f for f in template_uprobes(TEMPLATE) if f not in script_uprobes(script)]
    session = parse_bpftrace(read(assets, f"{name}.txt"))
    return [
        summarize(session.for_cgroup(cg), session, defined_counters(script), absent).to_dict()
        for cg in fixtures[name]["cgroup_ids"]
    ]


def test_template_defines_every_counter_of_the_summary() -> None:
    assert sorted(
        set(COUNTER_KEYS) | {"@uring_ops", "@undecoded", "@compat_syscalls"}
    ) == defined_counters(TEMPLATE)
    assert template_uprobes(TEMPLATE) == ["hash_file", "send_payload", "busy_wait"]


def test_render_drops_uprobes_of_missing_symbols() -> None:
    rendered = render_script(TEMPLATE, "/opt/client", {"send_payload", "main"}, PID)
    assert rendered.uprobes == ("send_payload",)
    assert rendered.absent_symbols == ("hash_file", "busy_wait")
    assert script_uprobes(rendered.text) == ["send_payload"]
    assert "uprobe:/opt/client:send_payload /pid == cpid/ {" in rendered.text
    assert "@hash_calls[cgroup] = count()" not in rendered.text
    code = [ln for ln in rendered.text.splitlines() if not ln.lstrip().startswith("//")]
    assert not any("@busy_wait_calls" in ln or "__BINARY__" in ln for ln in code)
    assert not any("__CGROUPS__" in ln for ln in code)
    assert rendered.text.startswith("// lab: client binary /opt/client\n")
    assert defined_counters(rendered.text) == sorted(
        set(COUNTER_KEYS) - {"@hash_calls", "@busy_wait_calls"}
        | {"@uring_ops", "@undecoded", "@compat_syscalls"}
    )


def test_render_keeps_the_rest_of_the_script_intact() -> None:
    everything = render_script(TEMPLATE, "/c", {"hash_file", "send_payload", "busy_wait"}, PID)
    assert everything.absent_symbols == ()
    assert everything.text.count("\n") == TEMPLATE.count("\n") + 2  # the header lines
    nothing = render_script(TEMPLATE, "/c", set(), PID)
    assert script_uprobes(nothing.text) == []
    # every brace still closes: the removed blocks were whole
    code = "".join(ln for ln in nothing.text.splitlines() if not ln.lstrip().startswith("//"))
    assert code.count("{") == code.count("}")


def test_cgroup_filter() -> None:
    assert cgroup_filter([Path("/sys/fs/cgroup/a"), Path("/sys/fs/cgroup/b")]) == (
        '(cgroup == cgroupid("/sys/fs/cgroup/a") || cgroup == cgroupid("/sys/fs/cgroup/b"))'
    )
    with pytest.raises(CollectorError):
        cgroup_filter([Path('/sys/fs/cgroup/a"b')])


def test_function_symbols_from_real_nm_output(assets: Path) -> None:
    full = function_symbols(read(assets, "program.symbols.txt"))
    assert {"hash_file", "send_payload", "busy_wait", "main"} <= full
    lacking = function_symbols(read(assets, "program_no_hash_file.symbols.txt"))
    assert "hash_file" not in lacking and "digest_file" in lacking
    assert "_DYNAMIC" not in full  # data symbols are not functions


def test_captured_scripts_are_the_template_rendered(assets: Path) -> None:
    assert script_uprobes(read(assets, "true.bt")) == []
    no_hash = read(assets, "program_no_hash_file.bt")
    assert script_uprobes(no_hash) == ["send_payload", "busy_wait"]
    assert "no such symbol: hash_file" in no_hash
    assert "cgroupid(" in no_hash


def test_program_golden(assets: Path, fixtures: dict[str, Any]) -> None:
    [s] = summaries_of(assets, fixtures, "program")
    port = fixtures["program"]["receiver_port"]
    assert {k: s["maps"][k] for k in ("@hash_calls", "@connects", "@sent_bytes")} == {
        "@hash_calls": "1",
        "@connects": "1",
        "@sent_bytes": "91",
    }
    assert (s["hash_calls"], s["send_payload_calls"], s["busy_wait_calls"]) == (1, 1, 1)
    assert s["connects"] == 1
    # sendto 5 + sendmmsg 4 + 5 + the 77-byte HAVE line; stdout's JSON lines do not count
    assert s["sent_bytes"] == 91
    assert s["read_bytes"] >= SIZE  # the source plus the loader's reads of libraries
    # the datagrams are seen by the kernel tracepoint and by the syscalls; the kernel's own
    # "port unreachable" replies are not destinations
    assert s["destinations"] == sorted(["127.0.0.1:47020", "127.0.0.1:47021", f"127.0.0.1:{port}"])
    assert s["absent_symbols"] == [] and s["unprinted_maps"] == []
    assert s["function_entries"] == {"busy_wait": 1, "hash_file": 1, "send_payload": 1}
    assert s["attached_probes"] == 12 and s["lost_events"] == 0 and s["events_complete"]
    assert s["undecodable"] == [] and s["uring_ops"] == {}


def test_absent_symbol_is_none_not_zero(assets: Path, fixtures: dict[str, Any]) -> None:
    [s] = summaries_of(assets, fixtures, "program_no_hash_file")
    assert "hash_calls" not in s
    assert s["absent_symbols"] == ["hash_file"]
    assert "@hash_calls" not in s["maps"]
    assert s["busy_wait_calls"] == 1 and s["send_payload_calls"] == 1
    assert s["connects"] == 1


def test_why_symbols_are_checked(assets: Path) -> None:
    # bpftrace 0.17 skips a uprobe on a missing symbol without a word and prints its
    # count() map as 0: left unpruned, the script would report 0 calls of a function
    # that does not exist.
    raw = parse_bpftrace(read(assets, "unpruned_missing_symbol.txt"))
    assert raw.complete
    assert [(name, value) for _, _, name, value, _ in raw.map_rows if name == "@hash_calls"] == [
        ("@hash_calls", "0")
    ]
    assert "hash_file" not in function_symbols(read(assets, "program_no_hash_file.symbols.txt"))


def test_unprinted_counters_are_observed_zeros(assets: Path, fixtures: dict[str, Any]) -> None:
    [s] = summaries_of(assets, fixtures, "true")
    assert "@sent_bytes" not in s["maps"]
    assert s["sent_bytes"] == 0 and "@sent_bytes" in s["unprinted_maps"]
    assert s["connects"] == 0 and s["destinations"] == []
    assert s["absent_symbols"] == ["busy_wait", "hash_file", "send_payload"]
    assert "hash_calls" not in s


def test_one_session_two_invocations_hash_storm(assets: Path, fixtures: dict[str, Any]) -> None:
    first, second = summaries_of(assets, fixtures, "native_hash_storm")
    port = fixtures["native_hash_storm"]["receiver_port"]
    for s in (first, second):
        assert s["maps"]["@hash_calls"] == "256"
        assert s["hash_calls"] == 256 and s["function_entries"]["hash_file"] == 256
        assert s["destinations"] == [f"127.0.0.1:{port}"]
    assert (first["connects"], second["connects"]) == (2, 1)
    assert (first["send_payload_calls"], second["send_payload_calls"]) == (1, 0)
    assert second["read_bytes"] >= 256 * NATIVE_SIZE
    assert second["sent_bytes"] == len("HAVE ") + 64 + len(f" {NATIVE_SIZE}\n")


def test_one_session_two_invocations_baseline(assets: Path, fixtures: dict[str, Any]) -> None:
    first, second = summaries_of(assets, fixtures, "native_baseline")
    assert (first["connects"], first["hash_calls"], first["send_payload_calls"]) == (2, 1, 1)
    assert first["busy_wait_calls"] == 0
    have = len("HAVE ") + 64 + len(f" {NATIVE_SIZE}\n")
    put = len("PUT ") + 64 + len(f" {NATIVE_SIZE}\n")
    assert first["sent_bytes"] == NATIVE_SIZE + have + put
    assert (second["connects"], second["send_payload_calls"], second["sent_bytes"]) == (1, 0, have)


def test_an_invocation_without_events_is_zero_only_in_a_complete_session() -> None:
    text = "Attaching 3 probes...\nlab: attached\nlab: end of trace\n@connects[7]: 1\n"
    session = parse_bpftrace(text)
    quiet = summarize(session.for_cgroup(8), session, ["@connects"], []).to_dict()
    assert quiet["connects"] == 0 and quiet["unprinted_maps"] == ["@connects"]


def test_killed_output_is_incomplete(assets: Path) -> None:
    parsed = parse_bpftrace(read(assets, "killed.txt"))
    assert parsed.attached_probes == 18
    assert not parsed.complete and parsed.map_rows == []


def test_lost_events_unix_destinations_and_undecodable_channels() -> None:
    text = (
        "Attaching 3 probes...\n"
        "lab: attached\n"
        "10 cg=5 pid=5 call=1 family=unix ret=-2 path=/run/a b.sock\n"
        "11 cg=5 pid=5 call=1 family=unix ret=0 path=\n"
        "12 cg=5 pid=5 call=1 family=0 ret=-97\n"
        "13 cg=5 pid=5 call=3 family=inet6 addr=::1 port=53 ret=4\n"
        "14 cg=5 pid=5 uring op=SENDMSG\n"
        "15 cg=5 pid=5 datagram family=inet proto=17 addr=127.0.0.2 port=9 type=1 len=40\n"
        "16 cg=5 pid=5 datagram family=inet proto=1 addr=127.0.0.1 port=0 type=3 len=70\n"
        "17 cg=5 pid=5 datagram family=inet proto=1 addr=127.0.0.3 port=0 type=8 len=70\n"
        "18 cg=6 pid=9 tcp-connect family=inet addr=127.0.0.9 port=80\n"
        "Lost 7 events\n"
        "lab: end of trace\n"
        "@connects[5]: 3\n"
        "@uring_ops[5, SENDMSG]: 1\n"
        "@undecoded[5]: 2\n"
        "@compat_syscalls[5]: 4\n"
    )
    session = parse_bpftrace(text)
    trace = session.for_cgroup(5)
    assert trace.destinations == [
        "127.0.0.2:9", "[::1]:53", "icmp:127.0.0.3", "unix:/run/a b.sock", "unix:@"
    ]  # fmt: skip
    assert session.for_cgroup(6).destinations == ["127.0.0.9:80"]
    s = summarize(trace, session, ["@connects", "@uring_ops", "@undecoded"], []).to_dict()
    assert s["lost_events"] == 7 and not s["events_complete"]
    assert s["connects"] == 3 and "read_bytes" not in s  # not defined by this script
    assert s["uring_ops"] == {"SENDMSG": 1}
    assert len(s["undecodable"]) == 3
    assert "io_uring SENDMSG" in s["undecodable"][0] and "sendmmsg" in s["undecodable"][1]
    # a 32-bit call has the other table's numbers: counted, never decoded, never vouched for
    assert s["undecodable"][2] == "4 32-bit system call(s) (int 0x80) not decoded"


def test_attach_paths_bpftrace_cannot_parse_are_refused() -> None:
    with pytest.raises(CollectorError, match="whitespace"):
        check_attach_path("/tmp/a b/client")
    with pytest.raises(CollectorError):
        check_attach_path("/tmp/a:b/client")
    check_attach_path("/tmp/lab-pass-x/box/client")


def _pass_ctx(tmp_path: Path, ids: list[int]) -> PassContext:
    return PassContext(
        run_dir=tmp_path,
        out_dir=tmp_path / "pass",
        client_path=Path("/usr/bin/true"),
        source_path=tmp_path / "source.bin",
        receiver_address=("127.0.0.1", 1),
        decoy_address=("127.0.0.1", 2),
        log=procs.CommandLog(tmp_path / "commands.jsonl", root=tmp_path),
        netns_argv=[],
        windows=[
            Window(i, tmp_path / "pass" / f"inv{i}", Path(f"/sys/fs/cgroup/x/{i}"), cg)
            for i, cg in enumerate(ids, start=1)
        ],
    )


def _stopped(
    assets: Path, tmp_path: Path, name: str, ids: list[int], done: procs.Completed
) -> dict[int, Any]:
    ctx = _pass_ctx(tmp_path, ids)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(assets / "bpftrace" / f"{name}.txt", ctx.out_dir / "bpftrace.txt")
    session = BpftraceSession()
    session._ctx = ctx
    session._rendered = RenderedScript(read(assets, "program.bt"), (), ())

    class Done:
        def stop(self) -> procs.Completed:
            return done

    session._bg = Done()  # type: ignore[assignment]
    return session.stop()


def test_stop_splits_the_session_per_invocation(
    assets: Path, tmp_path: Path, fixtures: dict[str, Any]
) -> None:
    ids = fixtures["native_hash_storm"]["cgroup_ids"]
    outs = _stopped(assets, tmp_path, "native_hash_storm", ids, completed("bpftrace", 0))
    assert sorted(outs) == [1, 2]
    first = outs[1]
    assert first.error is None and first.summary is not None
    assert first.summary.to_dict()["hash_calls"] == 256
    assert first.summary.to_dict()["cgroup_id"] == ids[0]
    split = (tmp_path / "pass" / "inv1" / "bpftrace.txt").read_text().splitlines()
    # the invocation's own lines, verbatim, between the session's markers
    assert split[:2] == ["Attaching 12 probes...", "lab: attached"]
    assert f"@hash_calls[{ids[0]}]: 256" in split and "lab: end of trace" in split
    assert not any(f"cg={ids[1]} " in line for line in split)
    assert "pass/inv1/bpftrace.txt" in first.artifacts and "pass/bpftrace.txt" in first.artifacts


def test_stop_quotes_bpftrace_when_it_failed(assets: Path, tmp_path: Path) -> None:
    ctx_err = tmp_path / "pass"
    ctx_err.mkdir()
    shutil.copyfile(assets / "bpftrace" / "start_failure.stderr", ctx_err / "bpftrace.stderr.txt")
    outs = _stopped(assets, tmp_path, "start_failure", [1], completed("bpftrace", 1))
    out = outs[1]
    assert out.summary is None and out.error is not None
    assert out.error.startswith("bpftrace exited with status 1")
    assert "tracepoint not found: syscalls:sys_enter_no_such_call" in out.error
    assert "RLIMIT_MEMLOCK" not in out.error


@pytest.mark.parametrize(
    ("name", "kw", "words"),
    [
        ("killed", {"status": None, "killed_by_signal": 9}, "killed by signal 9"),
        ("native_baseline", {"status": None, "timed_out": True}, "did not stop within"),
        ("killed", {"status": 0}, "never reported its probes attached"),
    ],
)
def test_stop_refuses_incomplete_sessions(
    assets: Path, tmp_path: Path, name: str, kw: dict[str, Any], words: str
) -> None:
    outs = _stopped(assets, tmp_path, name, [1], completed("bpftrace", kw.pop("status"), **kw))
    assert outs[1].summary is None
    assert outs[1].error is not None and words in outs[1].error


def test_attached_links_counts_perf_event_descriptors(tmp_path: Path) -> None:
    fd = tmp_path / "42" / "fd"
    fd.mkdir(parents=True)
    for i, target in enumerate(["anon_inode:[perf_event]"] * 3 + ["/dev/null", "pipe:[1]"]):
        os.symlink(target, fd / str(i))
    assert bpftrace.attached_links(42, proc=tmp_path) == 3
    assert bpftrace.attached_links(43, proc=tmp_path) == 0


def test_start_without_a_sandbox_is_refused(tmp_path: Path) -> None:
    ctx = _pass_ctx(tmp_path, [1])
    ctx.windows[0].cgroup_path = None
    with pytest.raises(CollectorError, match="cgroup per invocation"):
        BpftraceSession().start(ctx)


def test_probe_names_the_package_when_bpftrace_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: None)
    status = BpftraceSession.probe()
    assert not status.available
    assert status.reason is not None and "apt-get install bpftrace" in status.reason


def test_probe_names_missing_kernel_features(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(bpftrace, "BTF", tmp_path / "no-btf")
    status = BpftraceSession.probe()
    assert not status.available and status.reason is not None
    assert "CONFIG_DEBUG_INFO_BTF" in status.reason

    (tmp_path / "btf").write_text("")
    monkeypatch.setattr(bpftrace, "BTF", tmp_path / "btf")
    monkeypatch.setattr(bpftrace, "TRACEFS_CANDIDATES", (tmp_path / "tracing",))
    status = BpftraceSession.probe()
    assert status.reason is not None and "mount -t tracefs" in status.reason

    events = tmp_path / "tracing" / "events"
    events.mkdir(parents=True)
    monkeypatch.setattr(bpftrace, "UPROBE_PMU", tmp_path / "no-uprobe")
    status = BpftraceSession.probe()
    assert status.reason is not None and "CONFIG_UPROBE_EVENTS" in status.reason

    (tmp_path / "uprobe").mkdir()
    monkeypatch.setattr(bpftrace, "UPROBE_PMU", tmp_path / "uprobe")
    status = BpftraceSession.probe()
    assert status.reason is not None
    assert "lacks tracepoint raw_syscalls:sys_enter" in status.reason


def test_probe_requires_privilege(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(bpftrace, "_capabilities", lambda: 0)
    status = BpftraceSession.probe()
    assert not status.available and status.reason is not None and "root" in status.reason


@pytest.mark.parametrize("name", ["program", "program_no_hash_file", "true", "native_hash_storm"])
def test_summaries_match_the_results_schema(
    repo_root: Path, assets: Path, fixtures: dict[str, Any], name: str
) -> None:
    import jsonschema

    schema = json.loads((repo_root / "lab" / "schemas" / "results.schema.json").read_text())
    invocation = schema["properties"]["scenarios"]["items"]["properties"]["invocations"]
    observed = invocation["items"]["properties"]["observed"]["properties"]["bpftrace"]
    for summary in summaries_of(assets, fixtures, name):
        jsonschema.validate(summary, observed)


def test_an_exec_the_uprobes_do_not_cover_makes_function_counts_not_observed() -> None:
    text = (
        "Attaching 12 probes...\nlab: attached\n"
        "1 cg=7 pid=10 exec ino=55 dev=266338304 path=/usr/sbin/capsh\n"
        "2 cg=7 pid=10 exec ino=77 dev=266338304 path=/tmp/lab-pass-x/box/client\n"
        "3 cg=7 pid=10 exec ino=99 dev=44 path=/tmp/client copy\n"
        "4 cg=8 pid=11 exec ino=77 dev=266338304 path=/tmp/lab-pass-x/box/client\n"
        "lab: end of trace\n@hash_calls[8]: 3\n@connects[7]: 1\n"
    )
    session = parse_bpftrace(text)
    counters = ["@hash_calls", "@connects"]
    watched = {(266338304, 55), (266338304, 77)}
    copied = summarize(session.for_cgroup(7), session, counters, [], 7, watched=watched)
    # a copy hashed unseen: its count is not observed (never the 0 the maps imply)
    assert copied.hash_calls is None and copied.connects == 1
    assert copied.blind_spots == (
        "per-function counts: the cgroup ran an executable the uprobes were not attached "
        "to (/tmp/client copy)",
    )
    assert copied.to_dict()["blind_spots"] == list(copied.blind_spots)
    honest = summarize(session.for_cgroup(8), session, counters, [], 8, watched=watched)
    assert honest.hash_calls == 3 and honest.blind_spots == ()
    assert "blind_spots" not in honest.to_dict()


def test_the_template_reports_every_exec_with_its_inode() -> None:
    text = DEFAULT_SCRIPT.read_text()
    assert "tracepoint:sched:sched_process_exec /__CGROUPS__/" in text
    assert "exec ino=%llu dev=%u path=%s" in text


def test_kernel_identity_encodes_the_device_as_the_kernel_does(tmp_path: Path) -> None:
    st = os.stat(tmp_path)
    dev, ino = bpftrace.kernel_identity(str(tmp_path)) or (0, 0)
    assert ino == st.st_ino and dev >> 20 == os.major(st.st_dev)
    assert dev & 0xFFFFF == os.minor(st.st_dev)
    assert bpftrace.kernel_identity(str(tmp_path / "missing")) is None
