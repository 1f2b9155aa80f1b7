"""Interruption (issue 12): SIGTERM is handled like SIGINT, and one place marks the run
incomplete, names the kept directory, and never signs or packs it. The passes and the
signer are stubs here; tests/integration/test_interrupt.py sends a real SIGTERM."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from lab.errors import Interrupted
from lab.evidence.archive import GENERATED
from lab.pipeline import RunRequest
from lab.pipeline import run as orchestrate
from lab.run import interrupt
from lab.schemas import validate_results


def test_sigterm_raises_keyboard_interrupt_and_the_default_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt) as info, interrupt.terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
    assert isinstance(info.value, interrupt.Terminated)
    assert interrupt.signal_name(info.value) == "SIGTERM"
    assert interrupt.signal_name(KeyboardInterrupt()) == "SIGINT"
    assert signal.getsignal(signal.SIGTERM) == before


class _Result:
    incomplete: dict[str, Any] | None = None


def test_the_marker_removes_every_signing_file_and_the_archive(tmp_path: Path) -> None:
    run_dir = tmp_path / "run-1"
    run_dir.mkdir()
    for name in (*GENERATED, "report.pdf", "results.json"):
        (run_dir / name).write_text("x")
    for suffix in ("", ".partial", ".sha256", ".sha256.sig"):
        (tmp_path / f"run-1.tar.gz{suffix}").write_text("x")
    written: list[dict[str, Any] | None] = []
    said: list[str] = []
    result = _Result()
    error = interrupt.mark_interrupted(
        run_dir,
        result,
        reason="SIGTERM during the passes",
        say=said.append,
        write_results=lambda r, d: written.append(r.incomplete),
        render_markdown=lambda r: "INCOMPLETE\n",
    )
    assert isinstance(error, Interrupted) and error.exit_code == 130
    message = str(error)
    assert str(run_dir) in message and "neither signed nor packed" in message
    assert "SIGTERM during the passes" in message and "\n" not in message
    assert written == [{"reason": "SIGTERM during the passes"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-1"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["report.md", "results.json"]
    assert said and "SHA256SUMS" in said[0]


@pytest.mark.parametrize("where", ["run_plan", "finish"])
def test_an_interrupted_run_is_marked_and_never_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Interrupted during the passes or while writing: results.json says incomplete (valid
    against the schema), report.md says so, no archive, and the error names the directory."""
    real_finish = orchestrate.finish

    def cut(*args: Any, **kwargs: Any) -> Any:
        raise interrupt.Terminated("SIGTERM")

    def finish_then_cut(result: Any, run_dir: Path, **kwargs: Any) -> Any:
        real_finish(result, run_dir, **kwargs)  # a whole archive, then the interrupt
        raise interrupt.Terminated("SIGTERM")

    monkeypatch.setattr(orchestrate, "run_plan", cut if where == "run_plan" else lambda *a: [])
    if where == "finish":
        monkeypatch.setattr(orchestrate, "finish", finish_then_cut)
    out = tmp_path / "out"
    request = RunRequest(names=["baseline"], out=out, sandbox="off", run_id="run-cut")
    with pytest.raises(Interrupted) as info:
        orchestrate.execute(request, say=lambda _: None)
    run_dir = (out / "run-cut").resolve()
    assert str(run_dir) in str(info.value) and info.value.exit_code == 130
    document = json.loads((run_dir / "results.json").read_text())
    validate_results(document)
    assert document["incomplete"]["reason"].startswith("SIGTERM")
    assert "INCOMPLETE" in (run_dir / "report.md").read_text()
    assert not list(out.glob("*.tar.gz*"))
    assert not any((run_dir / name).exists() for name in GENERATED)
