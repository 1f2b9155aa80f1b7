"""The strace collector: golden parses of real traces (tests/assets/strace/, captured by
tests/assets/strace/capture.py) and the collector's handling of failed runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lab.collectors import strace, strace_parse
from lab.collectors.strace import StraceCollector
from lab.collectors.strace_parse import (
    descriptor,
    destinations_in,
    is_socket,
    iter_syscalls,
    parse_strace,
    split_args,
    unescape,
)
from lab.host import procs
from lab.sandbox.jail import GATED_EXECS, JAIL_EXECS
from tests.unit.collectors.helpers import SIZE, completed, make_ctx

NATIVE_SIZE = 524288


@pytest.fixture
def fixtures(assets: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((assets / "strace" / "fixtures.json").read_text())
    return loaded


def parse(assets: Path, fixtures: dict[str, Any], name: str) -> strace_parse.StraceTally:
    text = (assets / "strace" / f"{name}.txt").read_text()
    return parse_strace(text, fixtures[name]["source"])


GOLDEN = [
    "python_client",
    "threads",
    "network",
    "killed",
    "truncated",
    "native_hash_storm_second",
    "native_baseline_first",
]


@pytest.mark.parametrize("name", GOLDEN)
def test_golden(assets: Path, fixtures: dict[str, Any], name: str) -> None:
    summary = parse(assets, fixtures, name)
    got = summary.summary().to_dict() | {"complete": summary.complete}
    expected = json.loads((assets / "strace" / f"{name}.expected.json").read_text())
    assert got == expected


def test_python_client_figures_follow_from_the_program(
    assets: Path, fixtures: dict[str, Any]
) -> None:
    # two whole passes in 64 KiB reads (4 with data + 1 at EOF each) and one 100-byte pread;
    # the read on a directory descriptor fails and is not the source
    s = parse(assets, fixtures, "python_client")
    assert s.source_bytes_read == 2 * SIZE + 100
    assert s.source_reads == 2 * 5 + 1
    assert s.connects == 1
    assert s.destinations == [f"127.0.0.1:{fixtures['python_client']['receiver_port']}"]
    assert s.sent_bytes == len("HAVE ") + 64 + len(f" {SIZE}\n")
    assert s.exit_status == 0


def test_source_path_is_matched_through_strace_escaping(assets: Path) -> None:
    text = (assets / "strace" / "python_client.txt").read_text()
    assert "source \\0761.bin>" in text  # strace wrote ">" as \076
    assert unescape("/tmp/lab-fixture/source \\0761.bin") == "/tmp/lab-fixture/source >1.bin"


def test_threads_join_unfinished_and_resumed(assets: Path, fixtures: dict[str, Any]) -> None:
    text = (assets / "strace" / "threads.txt").read_text()
    assert "<unfinished ...>" in text and "resumed>" in text
    s = parse(assets, fixtures, "threads")
    # the main thread and two reader threads each read the whole source once
    assert s.source_bytes_read == 3 * SIZE
    assert s.processes == 3
    assert s.exit_status == 3
    port = fixtures["threads"]["receiver_port"]
    # sendto to 47020 and sendmmsg to 47021 are destinations without any connect
    assert s.destinations == sorted(["127.0.0.1:47020", "127.0.0.1:47021", f"127.0.0.1:{port}"])
    assert s.connects == 1
    # 5 (sendto) + 4 + 5 (sendmmsg msg_len) + 77 (HAVE line written to the TCP socket)
    assert s.sent_bytes == 5 + 9 + 77


def test_every_address_family(assets: Path, fixtures: dict[str, Any]) -> None:
    s = parse(assets, fixtures, "network")
    assert s.destinations == [
        "127.0.0.1:47012",
        "[::1]:47010",
        "[::1]:47011",
        "[::1]:47013",
        "unix:/tmp/lab-fixture/no such.sock",
        "unix:@lab-abstract",
    ]
    assert s.connects == 3  # refused and failed connects count too
    assert s.sent_bytes == 1 + 4 + 2


def test_killed_client(assets: Path, fixtures: dict[str, Any]) -> None:
    s = parse(assets, fixtures, "killed")
    assert s.complete
    assert s.exit_status is None
    assert s.killed_by_signal == 9


def test_truncated_trace_is_not_complete(assets: Path, fixtures: dict[str, Any]) -> None:
    s = parse(assets, fixtures, "truncated")
    assert not s.complete
    assert s.unparsed_lines == 1  # the call strace was printing when it was killed


def test_hash_storm_second_invocation(assets: Path, fixtures: dict[str, Any]) -> None:
    s = parse(assets, fixtures, "native_hash_storm_second")
    assert s.source_bytes_read == 134_217_728 == 256 * NATIVE_SIZE
    assert s.source_reads == 256 * (NATIVE_SIZE // 65536 + 1)
    assert s.connects == 1
    port = fixtures["native_hash_storm_second"]["receiver_port"]
    assert s.destinations == [f"127.0.0.1:{port}"]


def test_baseline_first_invocation(assets: Path, fixtures: dict[str, Any]) -> None:
    s = parse(assets, fixtures, "native_baseline_first")
    assert s.connects == 2
    assert s.source_bytes_read == 2 * NATIVE_SIZE  # hashed once, then sent from byte 0
    put = len("PUT ") + 64 + len(f" {NATIVE_SIZE}\n")
    have = len("HAVE ") + 64 + len(f" {NATIVE_SIZE}\n")
    assert s.sent_bytes == NATIVE_SIZE + put + have


def test_other_paths_are_not_the_source(assets: Path, fixtures: dict[str, Any]) -> None:
    text = (assets / "strace" / "python_client.txt").read_text()
    assert parse_strace(text, "/tmp/lab-fixture/other.bin").source_bytes_read == 0


def test_split_args_keeps_socket_decorations_whole() -> None:
    text = '3<TCP:[127.0.0.1:1->127.0.0.1:2]>, "a, b", 5, {x=1, y=[1, 2]}'
    assert split_args(text) == [
        "3<TCP:[127.0.0.1:1->127.0.0.1:2]>",
        '"a, b"',
        "5",
        "{x=1, y=[1, 2]}",
    ]
    assert descriptor("3<TCPv6:[[::1]:1->[::1]:2]>") == (3, "TCPv6:[[::1]:1->[::1]:2]")
    assert is_socket("UNIX-STREAM:[123->456]")
    assert is_socket("socket:[99]")
    assert not is_socket("/tmp/file")
    assert not is_socket("pipe:[1234]")


def test_payload_bytes_that_look_like_an_address_are_ignored() -> None:
    args = (
        '3<UDP:[1]>, "sa_family=AF_INET, sin_port=htons(9), sin_addr=inet_addr(\\"6.6.6.6\\")", '
        '9, 0, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("127.0.0.1")}, 16'
    )
    assert destinations_in(args) == ["127.0.0.1:53"]


def test_padded_results_and_sendfile() -> None:
    text = (
        '7 1.000000 openat(AT_FDCWD</w>, "/s", O_RDONLY) = 3</s> <0.000010>\n'
        "7 1.000100 sendfile(4<TCP:[127.0.0.1:5->127.0.0.1:6]>, 3</s>, NULL, 10) = 10 <0.1>\n"
        "7 1.000200 close(3</s>)        = 0 <0.000001>\n"
        "7 1.000300 exit_group(0)       = ?\n"
        "7 1.000400 +++ exited with 0 +++\n"
    )
    calls, _ = iter_syscalls(text)
    assert [c.name for c in calls] == ["openat", "sendfile", "close", "exit_group"]
    assert calls[-1].ret is None
    s = parse_strace(text, "/s")
    assert (s.source_bytes_read, s.source_reads, s.sent_bytes) == (10, 1, 10)
    assert s.syscalls == 4 and s.exit_status == 0 and s.complete


def test_wrap_keeps_the_client_command_last(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    argv = StraceCollector().wrap(["/bin/client", "--source", "a b"], ctx)
    assert argv[1:10] == [
        "-f",
        "--pidns-translation",
        "-ttt",
        "-T",
        "-yy",
        "-s",
        "16",
        "-o",
        str(ctx.out_dir / "strace.txt"),
    ]
    assert argv[-4:] == ["--", "/bin/client", "--source", "a b"]


def test_collect_parses_and_keeps_the_trace(assets: Path, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    shutil.copyfile(assets / "strace" / "python_client.txt", ctx.out_dir / "strace.txt")
    out = StraceCollector().collect(ctx, completed("strace", 0))
    assert out.error is None
    assert out.artifacts == ["inv1/strace.txt"]
    assert out.summary is not None
    record = out.summary.to_dict()
    assert record["source_bytes_read"] == 2 * SIZE + 100
    assert set(record) >= {
        "source_bytes_read",
        "source_reads",
        "connects",
        "destinations",
        "sent_bytes",
        "syscalls",
        "exit_status",
    }


def test_collect_reports_truncation(assets: Path, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    shutil.copyfile(assets / "strace" / "truncated.txt", ctx.out_dir / "strace.txt")
    out = StraceCollector().collect(ctx, completed("strace", None, killed_by_signal=9))
    assert out.summary is None
    assert out.error is not None and "truncated" in out.error
    assert out.artifacts == ["inv1/strace.txt"]


def test_collect_reports_timeout(assets: Path, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    shutil.copyfile(assets / "strace" / "python_client.txt", ctx.out_dir / "strace.txt")
    out = StraceCollector().collect(ctx, completed("strace", None, timed_out=True))
    assert out.summary is None
    assert out.error is not None and "did not finish within 5 s" in out.error


def test_collect_without_a_trace_quotes_stderr(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    err = tmp_path / "stderr"
    err.write_text(
        "strace: test_ptrace_get_syscall_info: PTRACE_TRACEME: Operation not permitted\n"
    )
    out = StraceCollector().collect(ctx, completed("strace", 1, stderr_path=str(err)))
    assert out.summary is None and out.artifacts == []
    assert out.error is not None and "Operation not permitted" in out.error


def test_probe_names_the_package_when_strace_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: None)
    status = StraceCollector.probe()
    assert not status.available
    assert status.reason is not None and "apt-get install strace" in status.reason


def test_probe_refuses_when_yama_forbids_ptrace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scope = tmp_path / "ptrace_scope"
    scope.write_text("3\n")
    monkeypatch.setattr(strace, "YAMA_PTRACE_SCOPE", scope)
    monkeypatch.setattr(procs, "which", lambda tool: "/usr/bin/strace")
    status = StraceCollector.probe()
    assert not status.available
    assert status.reason is not None and "= 3" in status.reason
    assert status.detail["yama_ptrace_scope"] == 3


@pytest.mark.parametrize("name", GOLDEN)
def test_summaries_match_the_results_schema(
    repo_root: Path, assets: Path, fixtures: dict[str, Any], name: str
) -> None:
    import jsonschema

    schema = json.loads((repo_root / "lab" / "schemas" / "results.schema.json").read_text())
    invocation = schema["properties"]["scenarios"]["items"]["properties"]["invocations"]
    observed = invocation["items"]["properties"]["observed"]["properties"]["strace"]
    jsonschema.validate(parse(assets, fixtures, name).summary().to_dict(), observed)


# -- the sandbox's own steps in the trace -----------------------------------------------------


def sandboxed(assets: Path, fixtures: dict[str, Any]) -> strace_parse.StraceTally:
    name = "sandboxed_baseline_first"
    text = (assets / "strace" / f"{name}.txt").read_text()
    fx = fixtures[name]
    return parse_strace(text, fx["source"], client_pid=fx["client_pid"], execs_before_client=3)


def test_sandbox_steps_are_not_the_clients(assets: Path, fixtures: dict[str, Any]) -> None:
    # nsenter, bwrap (two processes), the joining shell, capsh and prlimit run before the
    # client's own execve: 1,400-odd calls, none of them counted as the client's
    s = sandboxed(assets, fixtures)
    port = fixtures["sandboxed_baseline_first"]["receiver_port"]
    assert s.sandbox_syscalls > 1000
    assert s.processes == 1
    assert s.connects == 2
    assert s.destinations == [f"127.0.0.1:{port}"]
    assert s.source_bytes_read == 2 * NATIVE_SIZE
    assert s.exit_status == 0 and s.complete
    whole = parse_strace(
        (assets / "strace" / "sandboxed_baseline_first.txt").read_text(),
        fixtures["sandboxed_baseline_first"]["source"],
    )
    assert whole.syscalls == s.syscalls + s.sandbox_syscalls
    assert whole.processes > s.processes


def test_undecoded_descriptors_are_not_observed_rather_than_zero(
    repo_root: Path, assets: Path, fixtures: dict[str, Any]
) -> None:
    # What strace prints when it cannot read the client's /proc/PID/fd (no CAP_SYS_PTRACE
    # over lab-client): "read(3, ..." instead of "read(3</path>, ...". Bytes per file and
    # socket are then unknown; reported as 0 they would read as "the client read nothing".
    import re

    import jsonschema

    name = "sandboxed_baseline_first"
    fx = fixtures[name]
    text = (assets / "strace" / f"{name}.txt").read_text()
    bare = re.sub(r"(\b(?:read|pread64|write|sendto|sendmsg)\()(\d+)<[^>]*>", r"\1\2", text)
    assert bare != text
    s = parse_strace(bare, fx["source"], client_pid=fx["client_pid"], execs_before_client=3)
    assert s.undecoded_descriptors > 0
    row = s.summary().to_dict()
    for key in strace_parse.DESCRIPTOR_KEYS:
        assert key not in row
        assert "CAP_SYS_PTRACE" in row["unobserved"][key]
    # what needs no descriptor is still observed
    assert row["connects"] == 2 and row["destinations"] == [f"127.0.0.1:{fx['receiver_port']}"]
    schema = json.loads((repo_root / "lab" / "schemas" / "results.schema.json").read_text())
    invocation = schema["properties"]["scenarios"]["items"]["properties"]["invocations"]
    jsonschema.validate(row, invocation["items"]["properties"]["observed"]["properties"]["strace"])
    # the decoded trace has none
    assert sandboxed(assets, fixtures).undecoded_descriptors == 0


def test_client_calls_follow_forks_after_the_client_exec() -> None:
    def call(pid: int, name: str, ret: int, args: str = "") -> strace_parse.Syscall:
        return strace_parse.Syscall(pid, 0.0, name, args, ret, None, None)

    calls = [
        call(10, "execve", 0),  # the joining shell
        call(10, "clone", 11),  # a fork of the sandbox's own (not the client's)
        call(11, "connect", 0),
        call(10, "execve", 0),  # capsh
        call(10, "execve", 0),  # prlimit
        call(10, "execve", 0),  # the client
        call(10, "clone", 12),
        call(12, "clone", 13),
        call(13, "connect", 0),
        call(99, "connect", 0),  # not a descendant
    ]
    kept, processes = strace_parse.client_calls(calls, 10, 3)
    assert [(c.pid, c.name) for c in kept] == [
        (10, "execve"), (10, "clone"), (12, "clone"), (13, "connect")
    ]  # fmt: skip
    assert processes == 3
    assert strace_parse.client_calls(calls[:4], 10, 3) == ([], 0)  # the client never started


def test_umask_result_is_octal() -> None:
    calls, _ = iter_syscalls("1 1.000000 umask(022) = 022 <0.000004>\n")
    assert calls[0].ret == 0o22


def test_io_uring_makes_destinations_undecodable() -> None:
    text = (
        "7 1.0 io_uring_setup(4, {flags=0}) = 3<anon_inode:[io_uring]> <0.00001>\n"
        "7 1.1 io_uring_enter(3, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) = 1 <0.00002>\n"
        "7 1.2 +++ exited with 0 +++\n"
    )
    s = parse_strace(text, "/src")
    assert s.destinations == []
    assert s.undecodable and "io_uring" in s.undecodable[0]


def test_a_pid_of_the_sandbox_namespace_is_read_as_the_tracers() -> None:
    # the client's clone(2) returns its own namespace's pid; the family is followed by the
    # tracer's pid, the one every line of the trace starts with
    text = (
        '100  1.000000 execve("/bin/sh", [], []) = 0 <0.000100>\n'
        "100  1.100000 clone(child_stack=NULL, flags=SIGCHLD) = 3 /* 4536 in strace's PID NS */"
        " <0.000100>\n"
    )
    calls, _ = iter_syscalls(text)
    assert [c.ret for c in calls if c.name == "clone"] == [4536]


def test_a_trace_attached_at_the_gate_starts_with_the_client(
    assets: Path, fixtures: dict[str, Any]
) -> None:
    # strace -p on the jail's main process waiting at its gate (lab.sandbox.gate): the trace
    # begins with that process's own read of the gate's "G", then prlimit, then the client
    name = "sandboxed_attached_baseline_first"
    text = (assets / "strace" / f"{name}.txt").read_text()
    fx = fixtures[name]
    assert text.startswith(f"{fx['client_pid']} ") and "read(16<UNIX-STREAM:" in text.split("\n")[0]
    s = parse_strace(
        text,
        fx["source"],
        client_pid=fx["client_pid"],
        execs_before_client=JAIL_EXECS,
        attached_execs=GATED_EXECS,
    )
    assert s.connects == 2 and s.destinations == [f"127.0.0.1:{fx['receiver_port']}"]
    assert s.source_bytes_read == 2 * NATIVE_SIZE  # hashed once, then sent from byte 0
    assert s.processes == 1 and s.exit_status == 0 and s.complete
    # the filter's last calls and prlimit: a few dozen, not the jail's ~1,800
    assert 0 < s.sandbox_syscalls < 200
    # read as a trace that ran the jail, it would skip four execs and find no client at all
    wrong = parse_strace(text, fx["source"], client_pid=fx["client_pid"], execs_before_client=4)
    assert wrong.syscalls == 0 and not wrong.client_found


def test_a_trace_without_the_clients_execve_is_not_observed_rather_than_zero(
    tmp_path: Path, assets: Path, fixtures: dict[str, Any]
) -> None:
    # what a tracer let through the gate before it was ready left (seen once in the lab
    # image: strace missed prlimit's execve): the client's execve is the first one, so the
    # count of the sandbox's steps finds no client. Its figures must not read as zeros.
    name = "sandboxed_attached_baseline_first"
    fx = fixtures[name]
    lines = (assets / "strace" / f"{name}.txt").read_text().splitlines(keepends=True)
    text = "".join(line for line in lines if '"/usr/bin/prlimit"' not in line)
    ctx = make_ctx(tmp_path)
    ctx.client_pid = fx["client_pid"]
    (ctx.out_dir / strace.TRACE_NAME).write_text(text)
    out = StraceCollector().collect(ctx, completed("strace", 0))
    assert out.summary is None
    assert out.error is not None and "no execve of the client" in out.error
    assert out.artifacts == [ctx.relative(ctx.out_dir / strace.TRACE_NAME)]


def test_a_trace_that_ran_the_jail_is_not_taken_for_an_attached_one(
    assets: Path, fixtures: dict[str, Any]
) -> None:
    # its first call is the jail's first command's execve, by another process: the count of
    # the jail's own execs applies, whatever attached_execs says
    name = "sandboxed_baseline_first"
    fx = fixtures[name]
    text = (assets / "strace" / f"{name}.txt").read_text()
    both = parse_strace(
        text, fx["source"], client_pid=fx["client_pid"], execs_before_client=3, attached_execs=1
    )
    assert both.summary() == sandboxed(assets, fixtures).summary()


def test_attacher_traces_the_pid_with_the_same_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = make_ctx(tmp_path)
    collector = StraceCollector()
    wrapped = collector.wrap(["/bin/client"], ctx)
    started: list[procs.Background] = []

    class Recorded(procs.Background):
        def start(self) -> procs.Background:
            started.append(self)
            return self

    monkeypatch.setattr(procs, "Background", Recorded)
    attacher = collector.attacher(ctx)
    attacher.start(4242)
    [bg] = started
    assert bg.argv == [*wrapped[: wrapped.index("--")], "-p", "4242"]
    messages = ctx.out_dir / strace.STDERR_NAME
    assert bg.stderr == messages
    # ready once strace says it attached to that very process (after seize and interrupt)
    assert not attacher.ready(4242)
    messages.write_text("/usr/bin/strace: Process 42421 attached\n")
    assert not attacher.ready(4242)
    messages.write_text("/usr/bin/strace: Process 4242 attached\n")
    assert attacher.ready(4242)
