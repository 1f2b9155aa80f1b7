"""The bpftrace collector: script rendering, golden parses of real bpftrace 0.17 output
(tests/assets/bpftrace/, captured by tests/assets/strace/capture.py) and failed runs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lab.collectors import bpftrace
from lab.collectors.base import InvocationContext
from lab.collectors.bpftrace import (
    COUNTER_KEYS,
    DEFAULT_SCRIPT,
    BpftraceCollector,
    check_command_word,
    defined_counters,
    function_symbols,
    parse_bpftrace,
    render_script,
    script_uprobes,
    template_uprobes,
)
from lab.errors import CollectorError
from lab.host import procs
from tests.conftest import require
from tests.unit.collectors.helpers import SIZE, completed, make_ctx

NATIVE_SIZE = 524288
TEMPLATE = DEFAULT_SCRIPT.read_text()


@pytest.fixture
def fixtures(assets: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((assets / "bpftrace" / "fixtures.json").read_text())
    return loaded


def read(assets: Path, name: str) -> str:
    return (assets / "bpftrace" / name).read_text()


def summary_of(assets: Path, name: str) -> dict[str, Any]:
    """What collect() would report for a captured run: counters from the script run."""
    script = read(assets, f"{name}.bt")
    absent = [f for f in template_uprobes(TEMPLATE) if f not in script_uprobes(script)]
    return parse_bpftrace(read(assets, f"{name}.txt")).to_summary(defined_counters(script), absent)


def test_template_defines_every_counter_of_the_summary() -> None:
    assert defined_counters(TEMPLATE) == sorted(COUNTER_KEYS)
    assert template_uprobes(TEMPLATE) == ["hash_file", "send_payload", "busy_wait"]


def test_render_drops_uprobes_of_missing_symbols() -> None:
    rendered = render_script(TEMPLATE, "/opt/client", {"send_payload", "main"})
    assert rendered.uprobes == ("send_payload",)
    assert rendered.absent_symbols == ("hash_file", "busy_wait")
    assert script_uprobes(rendered.text) == ["send_payload"]
    assert "uprobe:/opt/client:send_payload /pid == cpid/ {" in rendered.text
    assert "@hash_calls = count()" not in rendered.text
    code = [ln for ln in rendered.text.splitlines() if not ln.lstrip().startswith("//")]
    assert not any("@busy_wait_calls" in ln or "__BINARY__" in ln for ln in code)
    assert rendered.text.startswith("// lab: client binary /opt/client\n")
    assert defined_counters(rendered.text) == sorted(
        set(COUNTER_KEYS) - {"@hash_calls", "@busy_wait_calls"}
    )


def test_render_keeps_the_rest_of_the_script_intact() -> None:
    everything = render_script(TEMPLATE, "/c", {"hash_file", "send_payload", "busy_wait"})
    assert everything.absent_symbols == ()
    assert everything.text.count("\n") == TEMPLATE.count("\n") + 1  # the header line
    nothing = render_script(TEMPLATE, "/c", set())
    assert script_uprobes(nothing.text) == []
    # every brace still closes: the removed blocks were whole
    code = "".join(ln for ln in nothing.text.splitlines() if not ln.lstrip().startswith("//"))
    assert code.count("{") == code.count("}")


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


def test_program_golden(assets: Path, fixtures: dict[str, Any]) -> None:
    s = summary_of(assets, "program")
    port = fixtures["program"]["receiver_port"]
    assert sorted(s["maps"]) == sorted(COUNTER_KEYS)
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
    assert s["destinations"] == sorted(["127.0.0.1:47020", "127.0.0.1:47021", f"127.0.0.1:{port}"])
    assert s["exit_status"] == 3
    assert s["absent_symbols"] == [] and s["unprinted_maps"] == []
    assert s["function_entries"] == {"busy_wait": 1, "hash_file": 1, "send_payload": 1}
    assert s["attached_probes"] == 21 and s["lost_events"] == 0 and s["events_complete"]


def test_absent_symbol_is_none_not_zero(assets: Path) -> None:
    s = summary_of(assets, "program_no_hash_file")
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
    assert raw.complete and raw.maps["@hash_calls"] == "0"
    assert "hash_file" not in function_symbols(read(assets, "program_no_hash_file.symbols.txt"))


def test_unprinted_sum_is_an_observed_zero(assets: Path) -> None:
    s = summary_of(assets, "true")
    assert "@sent_bytes" not in s["maps"]
    assert s["sent_bytes"] == 0 and s["unprinted_maps"] == ["@sent_bytes"]
    assert s["connects"] == 0 and s["destinations"] == []
    assert s["absent_symbols"] == ["busy_wait", "hash_file", "send_payload"]
    assert "hash_calls" not in s and s["exit_status"] == 0


def test_hash_storm_second_invocation(assets: Path, fixtures: dict[str, Any]) -> None:
    s = summary_of(assets, "native_hash_storm_second")
    assert s["maps"]["@hash_calls"] == "256"
    assert s["hash_calls"] == 256 and s["function_entries"]["hash_file"] == 256
    assert s["connects"] == 1 and s["send_payload_calls"] == 0
    assert s["read_bytes"] >= 256 * NATIVE_SIZE
    assert s["sent_bytes"] == len("HAVE ") + 64 + len(f" {NATIVE_SIZE}\n")
    port = fixtures["native_hash_storm_second"]["receiver_port"]
    assert s["destinations"] == [f"127.0.0.1:{port}"]


def test_baseline_first_invocation(assets: Path) -> None:
    s = summary_of(assets, "native_baseline_first")
    assert s["connects"] == 2 and s["hash_calls"] == 1 and s["send_payload_calls"] == 1
    assert s["busy_wait_calls"] == 0
    have = len("HAVE ") + 64 + len(f" {NATIVE_SIZE}\n")
    put = len("PUT ") + 64 + len(f" {NATIVE_SIZE}\n")
    assert s["sent_bytes"] == NATIVE_SIZE + have + put


def test_killed_output_is_incomplete(assets: Path) -> None:
    parsed = parse_bpftrace(read(assets, "killed.txt"))
    assert parsed.attached_probes == 18
    assert not parsed.complete and parsed.maps == {}


def test_lost_events_and_unix_destinations() -> None:
    text = (
        "Attaching 3 probes...\n"
        "10 pid=5 connect fd=3 family=unix path=/run/a b.sock\n"
        "11 pid=5 connect fd=3 family=unix path=\n"
        "12 pid=5 connect fd=3 family=0\n"
        "13 pid=5 sendmsg fd=4 family=inet6 addr=::1 port=53\n"
        "Lost 7 events\n"
        "lab: end of trace\n"
        "@connects: 3\n"
    )
    parsed = parse_bpftrace(text)
    assert parsed.destinations == ["[::1]:53", "unix:/run/a b.sock", "unix:@"]
    s = parsed.to_summary(["@connects"], [])
    assert s["lost_events"] == 7 and not s["events_complete"]
    assert s["connects"] == 3 and "read_bytes" not in s  # not defined by this script


def test_command_words_with_spaces_are_refused() -> None:
    with pytest.raises(CollectorError, match="whitespace"):
        check_command_word("/tmp/a b/client", "the client path")
    with pytest.raises(CollectorError, match="empty"):
        check_command_word("", "the client argument")
    check_command_word("--receiver=127.0.0.1:5", "the client argument")


def place(assets: Path, ctx: InvocationContext, name: str) -> None:
    shutil.copyfile(assets / "bpftrace" / f"{name}.txt", ctx.out_dir / "bpftrace.txt")
    shutil.copyfile(assets / "bpftrace" / f"{name}.bt", ctx.out_dir / "bpftrace.bt")


def test_collect_reports_the_clients_exit_status(assets: Path, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, client=Path("/usr/bin/true"))
    place(assets, ctx, "program")
    out = BpftraceCollector().collect(ctx, completed("bpftrace", 0))
    assert out.error is None and out.summary is not None
    assert out.client_exit_status == 3
    assert out.summary["hash_calls"] == 1
    assert out.artifacts == ["inv1/bpftrace.bt", "inv1/bpftrace.txt"]
    assert not BpftraceCollector.passes_exit_status


def test_collect_start_failure_quotes_bpftrace(assets: Path, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, client=Path("/usr/bin/true"))
    place(assets, ctx, "true")
    shutil.copyfile(assets / "bpftrace" / "start_failure.txt", ctx.out_dir / "bpftrace.txt")
    err = assets / "bpftrace" / "start_failure.stderr"
    out = BpftraceCollector().collect(ctx, completed("bpftrace", 1, stderr_path=str(err)))
    assert out.summary is None
    assert out.error is not None
    assert out.error.startswith("bpftrace exited with status 1")
    assert "tracepoint not found: syscalls:sys_enter_no_such_call" in out.error
    assert "RLIMIT_MEMLOCK" not in out.error


@pytest.mark.parametrize(
    ("name", "kw", "words"),
    [
        ("killed", {"status": None, "killed_by_signal": 9}, "killed by signal 9"),
        ("program", {"status": None, "timed_out": True}, "did not finish within 5 s"),
        ("killed", {"status": 0}, "truncated"),
    ],
)
def test_collect_refuses_incomplete_traces(
    assets: Path, tmp_path: Path, name: str, kw: dict[str, Any], words: str
) -> None:
    ctx = make_ctx(tmp_path, client=Path("/usr/bin/sleep"))
    shutil.copyfile(assets / "bpftrace" / f"{name}.txt", ctx.out_dir / "bpftrace.txt")
    shutil.copyfile(assets / "bpftrace" / "true.bt", ctx.out_dir / "bpftrace.bt")
    out = BpftraceCollector().collect(ctx, completed("bpftrace", kw.pop("status"), **kw))
    assert out.summary is None
    assert out.error is not None and words in out.error


def test_collect_without_script(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, client=Path("/usr/bin/true"))
    out = BpftraceCollector().collect(ctx, completed("bpftrace", 0))
    assert out.summary is None and out.error is not None and "bpftrace.bt" in out.error


def test_wrap_renders_the_script_for_the_binary(tmp_path: Path) -> None:
    require("nm", procs.which("nm") is not None, "binutils is not installed")
    true = Path(procs.which("true") or "/bin/true").resolve()
    ctx = make_ctx(tmp_path, client=true)
    argv = BpftraceCollector().wrap([str(true), "--x", "1"], ctx)
    out = ctx.out_dir / "bpftrace.txt"
    script = ctx.out_dir / "bpftrace.bt"
    assert argv[1:] == ["-o", str(out), str(script), "-c", f"{true} --x 1"]
    text = script.read_text()
    assert script_uprobes(text) == []  # coreutils' true has none of the client's functions
    assert (ctx.out_dir / "bpftrace.symbols.txt").exists()
    assert "no such symbol: hash_file, send_payload, busy_wait" in text


def test_wrap_refuses_arguments_bpftrace_would_split(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, client=Path("/usr/bin/true"))
    with pytest.raises(CollectorError, match="whitespace"):
        BpftraceCollector().wrap(["/usr/bin/true", "--source", "/tmp/a b"], ctx)


def test_probe_names_the_package_when_bpftrace_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: None)
    status = BpftraceCollector.probe()
    assert not status.available
    assert status.reason is not None and "apt-get install bpftrace" in status.reason


def test_probe_names_missing_kernel_features(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(bpftrace, "BTF", tmp_path / "no-btf")
    status = BpftraceCollector.probe()
    assert not status.available and status.reason is not None
    assert "CONFIG_DEBUG_INFO_BTF" in status.reason

    (tmp_path / "btf").write_text("")
    monkeypatch.setattr(bpftrace, "BTF", tmp_path / "btf")
    monkeypatch.setattr(bpftrace, "TRACEFS_CANDIDATES", (tmp_path / "tracing",))
    status = BpftraceCollector.probe()
    assert status.reason is not None and "mount -t tracefs" in status.reason

    events = tmp_path / "tracing" / "events"
    events.mkdir(parents=True)
    monkeypatch.setattr(bpftrace, "UPROBE_PMU", tmp_path / "no-uprobe")
    status = BpftraceCollector.probe()
    assert status.reason is not None and "CONFIG_UPROBE_EVENTS" in status.reason

    (tmp_path / "uprobe").mkdir()
    monkeypatch.setattr(bpftrace, "UPROBE_PMU", tmp_path / "uprobe")
    status = BpftraceCollector.probe()
    assert status.reason is not None
    assert "lacks tracepoint syscalls:sys_enter_connect" in status.reason


def test_probe_requires_privilege(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(bpftrace, "_capabilities", lambda: 0)
    status = BpftraceCollector.probe()
    assert not status.available and status.reason is not None and "root" in status.reason


@pytest.mark.parametrize(
    "name", ["program", "program_no_hash_file", "true", "native_hash_storm_second"]
)
def test_summaries_match_the_results_schema(repo_root: Path, assets: Path, name: str) -> None:
    import jsonschema

    schema = json.loads((repo_root / "lab" / "schemas" / "results.schema.json").read_text())
    invocation = schema["properties"]["scenarios"]["items"]["properties"]["invocations"]
    observed = invocation["items"]["properties"]["observed"]["properties"]["bpftrace"]
    jsonschema.validate(summary_of(assets, name), observed)
