"""The agent's workspace snapshotted while it works, and each distinct snapshot judged
afterwards (``lab.model.trajectory`` marks regressions and plateaus). The lab polls the
workspace (a bounded poll: every :data:`POLL_S` s, at most :data:`MAX_SNAPSHOTS`), copies a
changed state as plain files (the agent's ``.git`` left out, links kept as links) and commits
it to the lab's own private git directory, so ``final.bundle`` holds every snapshot too.

    shots = Snapshotter(ws, scratch, log=log); shots.start()
    ...                                            # the agent works
    taken = shots.stop()                           # [Snapshot(index, at_s, commit, tree)]
    record = judge_trajectory(shots, taken, rep_dir / "trajectory", judge)
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lab.campaign.workspace import Workspace, _git, _not_plain
from lab.host import procs
from lab.model.trajectory import (
    PLATEAU_K,
    JudgedSnapshot,
    Snapshot,
    TrajectoryRecord,
    distinct_count,
    mark,
    pick,
)

#: how often the workspace is looked at (seconds), and how many snapshots are taken at most
POLL_S = 0.25
MAX_SNAPSHOTS = 200
#: a workspace with more entries than this is not fingerprinted further (the rest unseen)
MAX_ENTRIES = 5000


def _fingerprint(root: Path) -> tuple[tuple[str, int, int], ...]:
    seen: list[tuple[str, int, int]] = []
    for top, dirs, files in os.walk(root, followlinks=False):
        if Path(top) == root and ".git" in dirs:
            dirs.remove(".git")
        for name in files:
            try:
                info = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            seen.append((os.path.join(top, name), info.st_size, info.st_mtime_ns))
            if len(seen) >= MAX_ENTRIES:
                return tuple(sorted(seen))
    return tuple(sorted(seen))


class Snapshotter:
    """Polls the workspace; commits each changed state to the lab's private git dir."""

    def __init__(self, ws: Workspace, scratch: Path, *, log: procs.CommandLog) -> None:
        self.ws = ws
        self.scratch = scratch
        self.log = log
        self.taken: list[Snapshot] = []
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._last: tuple[tuple[str, int, int], ...] = _fingerprint(ws.root)

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self._look()

    def _look(self) -> None:
        now = _fingerprint(self.ws.root)
        if now == self._last or len(self.taken) >= MAX_SNAPSHOTS:
            return
        self._last = now
        at = round(time.monotonic() - self.started, 3)
        copy = self.scratch / "snapshot"
        shutil.rmtree(copy, ignore_errors=True)
        try:
            shutil.copytree(self.ws.root, copy, symlinks=True, ignore=_not_plain(self.ws.root))
        except (OSError, shutil.Error):
            return  # the agent changed it while it was copied: the next look takes it
        gitdir, n = self.ws.gitdir, len(self.taken) + 1
        _git(gitdir, copy, ["add", "-A"], self.log)
        _git(gitdir, copy, ["commit", "--quiet", "--allow-empty", "-m", f"snapshot {n}"], self.log)
        commit = _git(gitdir, copy, ["rev-parse", "HEAD"], self.log, capture=True).strip()
        tree = _git(gitdir, copy, ["rev-parse", "HEAD^{tree}"], self.log, capture=True).strip()
        self.taken.append(Snapshot(n, at, commit, tree))

    def stop(self) -> list[Snapshot]:
        """Stop polling, take the final state once more, return every snapshot."""
        self._stop.set()
        self._thread.join(timeout=60)
        self._look()
        shutil.rmtree(self.scratch / "snapshot", ignore_errors=True)
        return list(self.taken)

    def tree_of(self, commit: str) -> str:
        empty = self.scratch / "diff-tree"
        empty.mkdir(exist_ok=True)
        return _git(self.ws.gitdir, empty, ["rev-parse", f"{commit}^{{tree}}"], self.log,
                    capture=True).strip()  # fmt: skip

    def native_patch(self, shot: Snapshot, out: Path) -> bool:
        """``git diff`` of ``native/`` from the baseline to ``shot`` into ``out``; False
        when native/ is as given. (An empty lab-owned work tree: nothing the agent wrote
        is read.)"""
        empty = self.scratch / "diff-tree"
        empty.mkdir(exist_ok=True)
        argv = ["diff", self.ws.baseline_commit, shot.commit, "--", "native/"]
        _git(self.ws.gitdir, empty, argv, self.log, stdout=out)
        return out.stat().st_size > 0


#: judges one snapshot's native.patch into a directory: ("judged", {clause: pass|fail}) or
#: ("build-failed", {})
SnapshotJudge = Callable[[Path, Path], tuple[str, dict[str, str]]]


#: tree id -> (status, clauses) already judged (the final result's, say)
Known = dict[str, tuple[str, dict[str, str]]]


def judge_one(
    shots: Snapshotter,
    shot: Snapshot,
    out_dir: Path,
    judge: SnapshotJudge,
    known: Known | None = None,
) -> JudgedSnapshot:
    where = out_dir / f"s{shot.index}"
    where.mkdir(parents=True, exist_ok=True)
    if known and shot.tree in known:  # the same tree as the final result: judged once
        status, clauses = known[shot.tree]
        (where / "same-as-final.txt").write_text(
            f"tree {shot.tree} is the final result's: its judgement is repetitions/rN/judged/\n"
        )
    elif shots.native_patch(shot, where / "native.patch"):
        status, clauses = judge(where / "native.patch", where)
    else:
        status, clauses = "no-change", {}
    return JudgedSnapshot(index=shot.index, at_s=shot.at_s, commit=shot.commit,
                          status=status, clauses=clauses)  # fmt: skip


def judge_trajectory(
    shots: Snapshotter,
    taken: list[Snapshot],
    out_dir: Path,
    judge: SnapshotJudge,
    *,
    plateau_k: int = PLATEAU_K,
    judged: list[JudgedSnapshot] | None = None,
    known: Known | None = None,
) -> TrajectoryRecord:
    """Judge the picked snapshots in order (``out_dir/sN/``); mark the trajectory. With
    ``judged`` (a :class:`PlateauWatch` judged them while the agent worked) only a final
    state unlike the last judged one is judged here."""
    if judged is None:
        rows = [judge_one(shots, shot, out_dir, judge, known) for shot in pick(taken)]
    else:
        rows = list(judged)
        trees = {s.index: s.tree for s in taken}
        last = trees.get(rows[-1].index) if rows else None
        if taken and taken[-1].tree != last:
            rows.append(judge_one(shots, taken[-1], out_dir, judge, known))
    return mark(rows, plateau_k=plateau_k, taken=len(taken), distinct=distinct_count(taken))


#: distinct snapshots judged at most while the agent works (--stop-on-plateau)
MAX_JUDGED_LIVE = 20


class PlateauWatch:
    """``--stop-on-plateau K``: judges each new distinct snapshot while the agent works;
    after K judged in a row with no new passing clause it calls ``stop`` (which kills the
    agent's cgroup) and records where."""

    def __init__(
        self,
        shots: Snapshotter,
        out_dir: Path,
        judge: SnapshotJudge,
        *,
        k: int,
        stop: Callable[[], None],
    ) -> None:
        self.shots, self.out_dir, self.judge, self.k, self.stop = shots, out_dir, judge, k, stop
        self.rows: list[JudgedSnapshot] = []
        self.stopped_at: int | None = None
        self._trees: list[str] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        seen = 0
        while not self._done.is_set() and len(self.rows) < MAX_JUDGED_LIVE:
            fresh = self.shots.taken[seen:]
            if not fresh:
                time.sleep(POLL_S)
                continue
            seen += len(fresh)
            shot = fresh[-1]  # the newest state; the ones it superseded are not judged
            if self._trees and self._trees[-1] == shot.tree:
                continue
            self._trees.append(shot.tree)
            self.rows.append(judge_one(self.shots, shot, self.out_dir, self.judge))
            marked = mark(self.rows, plateau_k=self.k, taken=seen, distinct=len(self.rows))
            if marked.plateau_at is not None:
                self.stopped_at = marked.plateau_at
                self.stop()
                return

    def finish(self) -> list[JudgedSnapshot]:
        """Stop judging (a judgement under way completes) and return what was judged."""
        self._done.set()
        self._thread.join()
        return list(self.rows)
