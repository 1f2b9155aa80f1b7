"""``benchmarks/untraced_less.py`` measures variants of the run that each leave out a part of
its work: each variant's edits must find their text in this checkout exactly once (or the
variant would not be what it says), and a run that was not calibrated says which expectations
it missed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, benchmark


def test_every_variant_edits_text_this_checkout_has_exactly_once(tmp_path: Path) -> None:
    less = benchmark("untraced_less")
    assert next(iter(less.VARIANTS)) == "as shipped" and not less.VARIANTS["as shipped"]
    for name, edits in less.VARIANTS.items():
        tree = tmp_path / name.replace(" ", "-").replace(",", "")
        for rel in {rel for rel, _, _ in edits}:
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / rel, tree / rel)
        less.edit(tree, edits)
        for rel, old, new in edits:
            text = (tree / rel).read_text(encoding="utf-8")
            assert new in text and (old not in text or old in new), (name, rel, old)


def test_the_edited_busy_spin_asks_for_100_ms_and_expects_as_much(tmp_path: Path) -> None:
    less = benchmark("untraced_less")
    rel = "scenarios/busy-spin.yaml"
    (tmp_path / "scenarios").mkdir()
    shutil.copyfile(ROOT / rel, tmp_path / rel)
    less.edit(tmp_path, less.SPIN_100)
    text = (tmp_path / rel).read_text(encoding="utf-8")
    assert '"--spin-ms", "100"' in text and "at_least: 0.1," in text and "0.3" not in text


def test_an_edit_whose_text_is_missing_stops_the_benchmark(tmp_path: Path) -> None:
    less = benchmark("untraced_less")
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "busy-spin.yaml").write_text('args: ["--spin-ms", "250"]\n')
    with pytest.raises(SystemExit, match=r"scenarios/busy-spin\.yaml: the text to replace"):
        less.edit(tmp_path, less.SPIN_100)


def test_a_run_not_calibrated_says_which_expectations_it_missed() -> None:
    stages = benchmark("untraced_stages")
    results = {
        "scenarios": [
            {
                "name": "busy-spin",
                "findings": [
                    {
                        "observer": "client",
                        "key": "cpu_s",
                        "expected": ">= 0.05",
                        "observed": 0.0385,
                        "met": False,
                    },
                    {
                        "observer": "client",
                        "key": "wall_s",
                        "expected": ">= 0.3",
                        "observed": 0.31,
                        "met": True,
                    },
                    {
                        "observer": "perf",
                        "key": "top_client_symbol",
                        "expected": "busy_wait",
                        "observed": None,
                        "met": None,
                    },
                ],
            }
        ]
    }
    assert stages.not_met(results) == ["busy-spin: client cpu_s expected >= 0.05, observed 0.0385"]
    assert stages.not_met({"scenarios": []}) == []
