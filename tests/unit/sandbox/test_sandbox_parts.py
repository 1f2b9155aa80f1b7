"""The sandbox's pure parts: the jail's command line, the cgroup file parsers, the capped
output streams and the stray-process scan (the integration tests run the real thing)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from lab.errors import SandboxError
from lab.sandbox import jail, seccomp
from lab.sandbox.cgroup import _keyed, parse_mountinfo, parse_proc_cgroup
from lab.sandbox.output import MARKER_PREFIX, CappedStream
from lab.sandbox.user import ClientUser
from tests.conftest import require


def spec(tmp_path: Path, **changes: object) -> jail.JailSpec:
    fields: dict[str, object] = {
        "netns_path": Path("/run/netns/lab-1-t"),
        "uid": 999,
        "gid": 995,
        "box": tmp_path / "box",
        "home": tmp_path / "home",
        "tmp": tmp_path / "tmp",
        "resolv_conf": tmp_path / "box" / "resolv.conf",
        "join_files": (Path("/sys/fs/cgroup/lab/run/inv1/cgroup.procs"),),
        "filter": tmp_path / "lab-filter",
    }
    fields.update(changes)
    return jail.JailSpec(**fields)  # type: ignore[arg-type]


# --- the jail's command line ---------------------------------------------------------------
def test_jail_order_namespaces_then_root_then_cgroup_then_identity(tmp_path: Path) -> None:
    argv = jail.jail_argv(spec(tmp_path), ["/box/client", "--source", "/box/s"], status_fd=7)
    names = [os.path.basename(a) for a in argv]
    order = [names.index(t) for t in ("nsenter", "bwrap", "sh", "capsh", "prlimit")]
    assert order == sorted(order)
    # the filter: bound read-only into the sandbox, run by capsh, then runs prlimit
    shell = argv.index(f"--shell={seccomp.INSIDE}")
    assert names.index("capsh") < shell < names.index("prlimit") == shell + 2
    bind = argv.index(seccomp.INSIDE)
    assert argv[bind - 2 : bind + 1] == ["--ro-bind", str(tmp_path / "lab-filter"), seccomp.INSIDE]
    assert jail.JAIL_EXECS == 4  # sh, capsh, lab-filter, prlimit
    assert argv[-3:] == ["/box/client", "--source", "/box/s"]
    assert "--net=/run/netns/lab-1-t" in argv
    assert argv[argv.index("--json-status-fd") + 1] == "7"
    # no capability, no new privileges, the client's ids, no supplementary groups
    for word in ("--drop=all", "--uid=999", "--gid=995", "--groups=", "--no-new-privs"):
        assert word in argv
    assert "--core=0" in " ".join(argv)


def test_a_gate_makes_the_filter_wait_there_first(tmp_path: Path) -> None:
    plain = jail.jail_argv(spec(tmp_path), ["/c"], status_fd=3)
    gated = jail.jail_argv(spec(tmp_path, gate_fd=11), ["/c"], status_fd=3)
    shell = gated.index(f"--shell={seccomp.INSIDE}")
    # capsh runs the filter with the words after "--": the gate first, then prlimit
    assert gated[shell + 1 : shell + 3] == ["--", "--gate=11"]
    assert os.path.basename(gated[shell + 3]) == "prlimit"
    assert [a for a in gated if a != "--gate=11"] == plain
    assert not any(a.startswith("--gate") for a in plain)
    # after the gate, one exec (prlimit) comes before the client's own
    assert jail.GATED_EXECS == 1 < jail.JAIL_EXECS


def test_jail_clears_the_environment_but_for_the_allow_list(tmp_path: Path) -> None:
    argv = jail.jail_argv(spec(tmp_path), ["/c"], status_fd=3)
    assert "--clearenv" in argv
    set_keys = [argv[i + 1] for i, a in enumerate(argv) if a == "--setenv"]
    assert set_keys == list(jail.ENVIRONMENT)
    assert set(jail.ENVIRONMENT) == {"PATH", "LANG", "HOME", "TMPDIR"}


def test_jail_shows_the_box_read_only_and_the_pass_state_writable(tmp_path: Path) -> None:
    argv = jail.jail_argv(spec(tmp_path), ["/c"], status_fd=3)
    pairs = [(argv[i], argv[i + 1], argv[i + 2]) for i in range(len(argv) - 2)]
    box = str(tmp_path / "box")
    assert ("--ro-bind", box, box) in pairs
    assert ("--bind", str(tmp_path / "home"), jail.HOME) in pairs
    assert ("--bind", str(tmp_path / "tmp"), "/tmp") in pairs
    assert ("--ro-bind", "/usr", "/usr") in pairs
    # nothing of the host is bound writable but the pass's own state and the cgroup dir
    writable = {src for flag, src, _ in pairs if flag == "--bind"}
    assert writable == {
        str(tmp_path / "home"),
        str(tmp_path / "tmp"),
        "/sys/fs/cgroup/lab/run/inv1",
    }


def test_a_key_file_inside_a_shown_directory_is_masked(tmp_path: Path) -> None:
    key = tmp_path / "box" / "lab.sec"
    key.parent.mkdir()
    key.write_text("secret")
    argv = jail.jail_argv(spec(tmp_path, masked=(key,)), ["/c"], status_fd=3)
    i = argv.index(str(key))
    assert argv[i - 2 : i] == ["--ro-bind", "/dev/null"]


def test_a_key_file_outside_every_shown_directory_is_never_named(tmp_path: Path) -> None:
    # not there at all: bwrap's argv (readable by any host process) does not name it
    key = tmp_path / "keys" / "lab.sec"
    key.parent.mkdir()
    key.write_text("secret")
    argv = jail.jail_argv(spec(tmp_path, masked=(key,)), ["/c"], status_fd=3)
    assert not any(str(key.parent) in word for word in argv)


def test_the_client_gets_a_pid_namespace_and_a_proc_hiding_other_uids(tmp_path: Path) -> None:
    argv = jail.jail_argv(spec(tmp_path), ["/c"], status_fd=3)
    assert "--unshare-pid" in argv and "--proc" in argv
    # no --die-with-parent: it would kill what the client leaves before it is observed
    assert "--die-with-parent" not in argv
    script = argv[argv.index("-c") + 1]
    assert "remount,hidepid=invisible /proc" in script
    assert os.path.basename(argv[argv.index("-c") + 3]) == "mount"


def test_every_parent_of_a_mount_point_is_made_0755_first(tmp_path: Path) -> None:
    argv = jail.jail_argv(spec(tmp_path), ["/c"], status_fd=3)
    box = str(tmp_path / "box")
    made = [argv[i + 3] for i, a in enumerate(argv) if a == "--perms" and argv[i + 2] == "--dir"]
    # /tmp is itself a mount point (the pass's tmp), so only the parents below it are made
    for parent in Path(box).parents:
        if parent in (Path("/"), Path("/tmp")):
            continue
        assert str(parent) in made
        assert argv.index(str(parent)) < argv.index(box)


def test_a_tool_outside_usr_is_refused_for_inside_the_jail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "capsh"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match=r"capsh resolves to .* outside /usr"):
        jail.jail_argv(spec(tmp_path), ["/c"], status_fd=3)


# --- cgroup files --------------------------------------------------------------------------
MOUNTINFO = """\
25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate
35 31 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
36 31 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
37 31 0:32 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
"""


def test_mountinfo_finds_the_v2_mount_and_v1_controllers() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert mounts.v2 == Path("/sys/fs/cgroup/unified")
    assert mounts.v1["pids"] == Path("/sys/fs/cgroup/pids")
    assert mounts.v1["memory"] == Path("/sys/fs/cgroup/memory")
    assert mounts.v1["cpuacct"] == Path("/sys/fs/cgroup/cpu,cpuacct")
    assert parse_mountinfo("garbage\n1 2 3\n").v2 is None


def test_proc_cgroup_maps_every_controller() -> None:
    paths = parse_proc_cgroup("0::/user.slice\n5:pids:/a\n4:cpu,cpuacct:/b\nbad line\n")
    assert paths == {"": "/user.slice", "pids": "/a", "cpu": "/b", "cpuacct": "/b"}


def test_keyed_files_ignore_what_is_not_a_number() -> None:
    assert _keyed("usage_usec 1200\npopulated 1\nmax max\n\n") == {
        "usage_usec": 1200,
        "populated": 1,
    }


# --- capped output -------------------------------------------------------------------------
def capture(data: bytes, tmp_path: Path, *, head: int, tail: int) -> tuple[bytes, object]:
    r, w = os.pipe()
    stream = CappedStream(r, tmp_path / "out", head=head, tail=tail)
    stream.start()
    writer = threading.Thread(target=lambda: (os.write(w, data), os.close(w)))
    writer.start()
    writer.join()
    record = stream.join(timeout=10)
    return (tmp_path / "out").read_bytes(), record


def test_small_output_is_kept_whole(tmp_path: Path) -> None:
    kept, record = capture(b"a\nb\n", tmp_path, head=100, tail=100)
    assert kept == b"a\nb\n"
    assert record.omitted_bytes == 0 and record.total_lines == 2  # type: ignore[attr-defined]


def test_a_flood_keeps_whole_lines_at_both_ends_and_counts_the_middle(tmp_path: Path) -> None:
    lines = [f"line {i}\n".encode() for i in range(100_000)]
    data = b"".join(lines)
    kept, record = capture(data, tmp_path, head=1000, tail=1000)
    assert len(kept) < 2200
    head, marker, tail = kept.partition(MARKER_PREFIX)
    assert marker and head.endswith(b"\n") and head.startswith(b"line 0\n")
    tail = tail.split(b"\n", 1)[1]  # after the marker line
    assert tail.endswith(b"line 99999\n") and tail.startswith(b"line ")
    assert record.total_bytes == len(data)  # type: ignore[attr-defined]
    assert record.total_lines == 100_000  # type: ignore[attr-defined]
    kept_lines = head.count(b"\n") + tail.count(b"\n")
    assert record.omitted_lines == 100_000 - kept_lines  # type: ignore[attr-defined]
    assert record.omitted_bytes == len(data) - len(head) - len(tail)  # type: ignore[attr-defined]


# --- stray processes -----------------------------------------------------------------------
def fake_proc(root: Path, pid: int, uid: int, state: str) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "stat").write_text(f"{pid} (odd) name) {state} 1 1 1\n")
    os.chown(d, uid, 0)


def test_zombies_are_not_running_processes(tmp_path: Path) -> None:
    require("root", os.geteuid() == 0, "chown to another user needs root")
    user = ClientUser(name="lab-client", uid=4242, gid=4242)
    fake_proc(tmp_path, 10, 4242, "S")
    fake_proc(tmp_path, 11, 4242, "Z")
    fake_proc(tmp_path, 12, 0, "R")
    (tmp_path / "self").mkdir()
    assert user.processes(proc=tmp_path) == [10]


def test_invocation_cgroup_names_say_nothing_of_the_invocation() -> None:
    from lab.sandbox.cgroup import opaque_name

    names = {opaque_name() for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert name.startswith("inv-") and len(name) == 20
        assert "timing" not in name and "untraced" not in name


def test_the_main_process_is_the_first_child_of_bwraps_init(tmp_path: Path) -> None:
    from lab.sandbox.supervise import _first_child

    assert _first_child(os.getpid(), timeout_s=0.01) is None  # no child: None, not a guess
    assert _first_child(2**22 + 7, timeout_s=0.01) is None  # no such process


def test_the_client_user_is_named_by_lab_client_user_when_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lab.sandbox import user

    monkeypatch.delenv(user.ENV_NAME, raising=False)
    assert user.default_name() == "lab-client"
    monkeypatch.setenv(user.ENV_NAME, "lab-client-dev2")
    assert user.default_name() == "lab-client-dev2"
