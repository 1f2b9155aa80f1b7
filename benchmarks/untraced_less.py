#!/usr/bin/env python3
"""What an untraced ``lab run --all`` would take if the run did less (a benchmark, not a
test): the run as shipped against variants of the same commit that each leave out a part
of the run's work, alternated round by round, each read stage by stage from its own records
(``untraced_stages.py``).

Issue 25's untraced goal (1.0 s on the lab's 2-core machine) is out of reach here with the
run's evidence and calibration unchanged; the ways left are a run that does less. This
measures what each would buy, rather than estimating it from CPU totals:

* ``no PDF``: the PDF's drawer neither warms up (reportlab, the fonts) nor draws; it writes
  an empty ``report.pdf``. Everything else (results, Markdown, HTML, signing, the archive)
  is as shipped;
* ``busy-spin 100 ms``: busy-spin spins 100 ms an invocation instead of the seeded 300 ms
  (its ``wall_s`` expectation lowered to match), so its chain of two invocations, the
  run's longest, is 0.4 s shorter;
* both at once.

Each variant is a detached worktree of ``--rev`` with the named edits applied as text (an
edit whose text is not found stops the benchmark: the variant would not be what it says),
its client built and its modules byte-compiled. Every measured run must be calibrated: one
that misses an expectation ends 1, and the benchmark stops, naming what was missed.

    python benchmarks/untraced_less.py --rounds 12 --json benchmarks/untraced-less.json

Run it on an otherwise idle machine; it takes about 10 s a round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_to_evidence import checkout, remove_checkout, resolve, summary
from untraced_stages import one_run, sha256_speed

#: the drawer's side: no warm-up, and an empty report.pdf for every job
NO_PDF = (
    ("lab/reports/drawer.py", "    with contextlib.suppress(Exception):\n        warm()\n", ""),
    (
        "lab/reports/drawer.py",
        '    """One job as the lab sends it (``lab.pipeline.drawing.Drawer.draw``)."""\n',
        '    """One job as the lab sends it (``lab.pipeline.drawing.Drawer.draw``)."""\n'
        '    Path(out).write_bytes(b"")\n'
        "    return\n",
    ),
)
#: busy-spin's spin, and the expectation that follows from it
SPIN_100 = (
    ("scenarios/busy-spin.yaml", 'args: ["--spin-ms", "300"]', 'args: ["--spin-ms", "100"]'),
    (
        "scenarios/busy-spin.yaml",
        'key: wall_s, at_least: 0.3, note: "300 ms',
        'key: wall_s, at_least: 0.1, note: "100 ms',
    ),
    # the seeded 0.05 s is a sixth of a 300 ms spin; a 100 ms one under the run's load
    # burnt 0.039 s of CPU in one of 8 runs here (0.058 to 0.10 s in the others)
    ("scenarios/busy-spin.yaml", "key: cpu_s, at_least: 0.05,", "key: cpu_s, at_least: 0.02,"),
)
#: variant -> its edits (path, text, replacement); the first is the run as shipped
VARIANTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "as shipped": (),
    "no PDF": NO_PDF,
    "busy-spin 100 ms": SPIN_100,
    "busy-spin 100 ms, no PDF": SPIN_100 + NO_PDF,
}
#: the stages shown per variant (untraced_stages.STAGES' keys), and the tail after them
SHOWN = ("chain_start", "chain", "after_chain", "last_exit", "tail", "wall", "busy")


def edit(tree: Path, edits: tuple[tuple[str, str, str], ...]) -> None:
    """Apply ``edits`` to the checkout ``tree``; stop if a text is not there exactly once."""
    for rel, old, new in edits:
        path = tree / rel
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise SystemExit(f"{rel}: the text to replace is not there once: {old!r}")
        path.write_text(text.replace(old, new), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rev", default="HEAD", help="the commit every variant is made of")
    parser.add_argument("--rounds", type=int, default=12, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first")
    parser.add_argument("--json", type=Path, help="also write every run and the summary here")
    args = parser.parse_args()
    rev = resolve(args.rev)
    speed = sha256_speed()
    print(f"{rev}; openssl speed -evp sha256 (bytes per second, by block size):\n  {speed}")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="untraced-less-") as scratch:
        trees: dict[str, Path] = {}
        try:
            for number, (name, edits) in enumerate(VARIANTS.items()):
                into = Path(scratch) / f"tree{number}"
                trees[name] = checkout(rev, into, lambda tree, e=edits: edit(tree, e))
            names = list(VARIANTS)
            for index in range(-args.warmup, args.rounds):
                # each round starts with the next variant, so that none is always first
                shift = index % len(names)
                for name in names[shift:] + names[:shift]:
                    out = Path(scratch) / "out"
                    out.mkdir(exist_ok=True)
                    got = one_run(out, tree=trees[name])
                    got["tail"] = got["wall"] - got["last_exit"]
                    if index >= 0:
                        runs[name].append(got)
                        print(f"round {index + 1:2d}  {name:<26} {got['wall']:.3f} s", flush=True)
        finally:
            for tree in trees.values():
                remove_checkout(tree)
    shipped = runs["as shipped"]
    table = {}
    for name, got in runs.items():
        ratios = [v["wall"] / s["wall"] for v, s in zip(got, shipped, strict=True)]
        table[name] = {key: summary([r[key] for r in got]) for key in SHOWN}
        table[name]["wall_ratio"] = summary(ratios)
    print(
        f"\n{len(shipped)} rounds, medians (s; busy: core-s): busy-spin's first client, its "
        "chain, the chain's end → the last client's exit, the last client's exit, the tail "
        "after it, the wall, the machine's busy time; and the wall ÷ the run as shipped's, "
        "paired by round"
    )
    print(f"{'variant':<26}" + "".join(f"{key:>12}" for key in SHOWN) + f"{'÷ shipped':>12}")
    for name, row in table.items():
        cells = "".join(f"{row[key]['median']:>12.3f}" for key in SHOWN)
        print(f"{name:<26}{cells}{row['wall_ratio']['median']:>12.3f}")
    best = min(statistics.median(r["wall"] for r in got) for got in runs.values())
    print(f"\nthe shortest variant's median wall: {best:.3f} s (issue 25's goal: 1.0 s)")
    if args.json is not None:
        document = {"rev": rev, "sha256_speed": speed, "runs": runs, "summary": table}
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
