"""An interrupted run (Ctrl-C, or SIGTERM from ``docker stop``, ``timeout`` or Kubernetes):
the one place that marks it incomplete and says where it is kept.

    with terminate_as_interrupt():           # the CLI: SIGTERM raises KeyboardInterrupt too
        ...
    except KeyboardInterrupt:
        raise mark_interrupted(run_dir, result, stage="during the passes", say=say)

:func:`mark_interrupted` ignores further SIGINT/SIGTERM while it works, removes every
signing file and archive the run may have begun (an interrupted run is never signed or
packed), writes ``results.json`` with ``"incomplete": {"reason": ...}`` (when there is a
result to write) and ``report.md`` saying so, and returns the :class:`~lab.errors.Interrupted`
error (exit status 130) whose sentence names the kept run directory.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from lab.errors import Interrupted

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT would raise KeyboardInterrupt, so both are handled alike."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signal.Signals(signum).name)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated` (a KeyboardInterrupt); the previous
    handler (normally the default) is restored on exit. Outside the main thread, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """SIGINT and SIGTERM ignored (a second Ctrl-C must not tear the marker half-written)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = [signal.signal(s, signal.SIG_IGN) for s in _SIGNALS]
    try:
        yield
    finally:
        for s, handler in zip(_SIGNALS, previous, strict=True):
            signal.signal(s, handler)


def signal_name(exc: BaseException) -> str:
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"


def archive_paths(run_dir: Path) -> list[Path]:
    """Every file a signed, packed run adds: the signing files in the run directory and the
    archive beside it (with its checksum and signature, and the ``.partial`` file being written)."""
    out = run_dir.parent
    name = run_dir.name
    suffixes = ("", ".partial", ".sha256", ".sha256.sig")
    from lab.evidence.archive import GENERATED

    return [run_dir / g for g in GENERATED] + [out / f"{name}.tar.gz{s}" for s in suffixes]


def mark_interrupted(
    run_dir: Path,
    result: Any | None,
    *,
    reason: str,
    say: Callable[[str], None],
    write_results: Callable[[Any, Path], None],
    render_markdown: Callable[[Any], str] | None = None,
) -> Interrupted:
    """Mark the run in ``run_dir`` incomplete for ``reason`` (see the module docstring) and
    return the error to raise."""
    with _shielded():
        removed = []
        for path in archive_paths(run_dir):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path.name)
        with contextlib.suppress(FileNotFoundError):
            (run_dir / "report.pdf").unlink()  # possibly half drawn; report.md says why
        marked = False
        if result is not None and run_dir.is_dir():
            result.incomplete = {"reason": reason}
            write_results(result, run_dir)
            if render_markdown is not None:
                (run_dir / "report.md").write_text(render_markdown(result), encoding="utf-8")
            marked = True
        if removed:
            say(f"Removed the signing files and archive the interrupted run had begun: {removed}")
    where = f"the partial run is kept in {run_dir}"
    if marked:
        where += ", marked incomplete in results.json and report.md"
    return Interrupted(
        f"interrupted ({reason}); every process the lab started was stopped, {where}; it was "
        "neither signed nor packed: run it again for evidence."
    )
