"""S3's witnesses on captured harness runs: the vulnerable Store's writes outside are
found with their verbatim lines; the correct Store's run holds none."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from lab.workloads.safestore.contain import Witness, evidence_text, witness
from lab.workloads.safestore.plan import Layout, listing_changes

#: the traces were recorded before the jail ran its system-call filter (sh, capsh, prlimit)
OLD_JAIL_EXECS = 3


def _listing(text: str) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in text.splitlines() if line)


def _judge(assets: Path, name: str) -> tuple[dict[str, object], Witness]:
    meta = json.loads((assets / "safestore" / f"strace-{name}.json").read_text())
    text = gzip.decompress((assets / "safestore" / f"strace-{name}.txt.gz").read_bytes())
    layout = Layout(Path(str(meta["base"])), int(meta["attempts"]))
    changes = listing_changes(
        _listing(str(meta["outside_before"])), _listing(str(meta["outside_after"]))
    )
    found = witness(
        text.decode(),
        client_pid=int(meta["harness_pid"]),
        layout=layout,
        changes=changes,
        execs_before_client=OLD_JAIL_EXECS,
    )
    return meta, found


def test_vulnerable_store_caught_by_both_witnesses(assets: Path) -> None:
    meta, found = _judge(assets, "vulnerable")
    assert len(found.violations) == meta["kernel_violations"] == 20
    assert len(found.changes) == meta["outside_changes"] == 20
    assert found.complete and found.found_harness
    what = [w for w, _ in found.violations]
    # the mkdir through the planted symlink is resolved by the lab's own map of its links
    assert any(w.startswith("created ") and "/root/link/sub (mkdirat" in w for w in what)
    for _, lines in found.violations:
        assert lines, "every violation keeps its trace lines"
    text = evidence_text(found)
    assert "# 20 calls by the harness touched the file system outside the root" in text
    assert "changed outside/target.txt" in text


def test_correct_store_leaves_nothing_outside(assets: Path) -> None:
    _, found = _judge(assets, "correct")
    assert found.violations == ()
    assert found.changes == ()
    assert found.complete and found.found_harness
    # the attacker (and its threads) are set apart, so its swaps are nobody's violation
    assert len(found.attacker_pids) > 1
    assert found.unconfirmed == ()


def test_wrong_pid_finds_no_harness(assets: Path) -> None:
    meta = json.loads((assets / "safestore" / "strace-correct.json").read_text())
    text = gzip.decompress((assets / "safestore" / "strace-correct.txt.gz").read_bytes())
    layout = Layout(Path(str(meta["base"])), 1)
    found = witness(text.decode(), client_pid=1, layout=layout, changes=[])
    assert not found.found_harness


def test_a_second_attacker_exec_sets_nothing_apart(assets: Path) -> None:
    """A candidate that runs ``harness attack`` itself cannot hide calls behind it."""
    meta = json.loads((assets / "safestore" / "strace-correct.json").read_text())
    text = gzip.decompress((assets / "safestore" / "strace-correct.txt.gz").read_bytes())
    lines = text.decode().splitlines()
    stamp = lines[-2].split()[1]
    forged = (
        f'{meta["harness_pid"]} {stamp} execve("/box/harness", ["/box/harness", "attack", '
        '"a", "b"], 0xc000094840 /* 5 vars */) = 0 <0.000100>'
    )
    layout = Layout(Path(str(meta["base"])), 1)
    found = witness(
        "\n".join([*lines[:-1], forged, lines[-1]]) + "\n",
        client_pid=int(meta["harness_pid"]),
        layout=layout,
        changes=[],
        execs_before_client=OLD_JAIL_EXECS,
    )
    assert found.attacker_pids == ()
    assert found.violations == ()  # the attacker's swaps stay inside the root
