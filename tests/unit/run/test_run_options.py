"""``lab run`` / ``lab evaluate`` refuse bad options, scenarios and output directories in one
sentence, with exit status 2, before anything is written (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import ClientError, UsageError
from lab.host.writable import check_writable_dir, filesystem_type
from lab.run.options import check_run_options
from tests.conftest import ROOT
from tests.unit.test_cli import lab

CLIENT = ROOT / "native" / "backup-client"


def refused(args: list[str], out: Path, needle: str) -> None:
    done = lab(*args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], done.stderr
    assert not out.exists() or not any(out.iterdir()), "something was written"


@pytest.mark.parametrize(
    ("option", "value"),
    [("--timeout", "nan"), ("--timeout", "-1"), ("--timeout", "inf"), ("--repetitions", "5000")],
)
def test_run_refuses_bad_numbers(tmp_path: Path, option: str, value: str) -> None:
    out = tmp_path / "o"
    refused(["run", "baseline", option, value, "--out", str(out)], out, option)


@pytest.mark.parametrize("out", ["/proc/x", "/etc/passwd/x"])
def test_run_refuses_an_impossible_out_directory(out: str) -> None:
    refused(["run", "baseline", "--no-archive", "--out", out], Path(out), f"--out {out}")


def test_run_refuses_a_client_that_is_not_a_program(tmp_path: Path) -> None:
    out = tmp_path / "o"
    refused(["run", "baseline", "--client", "/etc/passwd", "--out", str(out)], out, "/etc/passwd")


def test_a_word_where_a_number_is_compared_writes_nothing(tmp_path: Path) -> None:
    # was: the whole run, then a TypeError, with 10 files left behind
    good = (ROOT / "scenarios" / "baseline.yaml").read_text()
    bad = good.replace("key: connections, equals: 2}", 'key: connections, at_least: "two"}')
    assert bad != good
    (tmp_path / "baseline.yaml").write_text(bad)
    out = tmp_path / "o"
    args = ["run", "baseline", "--scenario-dir", str(tmp_path), "--out", str(out)]
    refused(args, out, "at_least' must be a number")


def test_evaluate_refuses_bad_numbers_before_anything(tmp_path: Path) -> None:
    out = tmp_path / "o"
    args = ["evaluate", "--binary", str(CLIENT), "--local", "--timeout", "nan", "--out", str(out)]
    refused(args, out, "--timeout")
    args = ["evaluate", "--binary", str(CLIENT), "--local", "--timing-runs", "100000"]
    refused([*args, "--out", str(out)], out, "--timing-runs")


def test_check_run_options_in_process(tmp_path: Path) -> None:
    ok = {"repetitions": 1, "size": 1024, "timeout_s": 1.0, "out": tmp_path / "new" / "dir"}
    check_run_options(**ok, client=None)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="--size"):
        check_run_options(**{**ok, "size": 1 << 40}, client=None)  # type: ignore[arg-type]
    (tmp_path / "script").write_text("echo hi\n")
    (tmp_path / "script").chmod(0o755)
    with pytest.raises(ClientError, match="not a program"):
        check_run_options(**ok, client=tmp_path / "script")  # type: ignore[arg-type]
    assert not (tmp_path / "new").exists()


def test_writable_dir_checks(tmp_path: Path) -> None:
    assert filesystem_type(Path("/proc/self")) == "proc"
    check_writable_dir(tmp_path / "a" / "b", option="--out")
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is not a directory"):
        check_writable_dir(tmp_path / "file" / "x", option="--out")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="is not a directory"):
        check_writable_dir(tmp_path / "dangling", option="--out")
