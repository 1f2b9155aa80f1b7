"""lab._parser: every option of every subcommand has help text, ``prog`` is the invoked
name, shell completion comes from the same parser (shtab)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from lab._parser import COMPLETION_SHELLS, build_parser, prog_name
from tests.conftest import ROOT


def _parsers(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path or "(top level)", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions}
            for name, child in action.choices.items():
                assert name in helped, f"subcommand '{path} {name}' has no help text"
                yield from _parsers(child, f"{path} {name}".strip())


def test_every_option_of_every_subcommand_has_help() -> None:
    missing = []
    names = []
    for path, parser in _parsers(build_parser()):
        names.append(path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.help or not action.help.strip():
                missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without help text: " + ", ".join(missing)
    assert {"run", "evaluate", "verify", "doctor", "merge", "keys generate"} <= set(names)


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        ("/work/lab/lab/__main__.py", "python -m lab"),
        ("/usr/local/bin/lab", "lab"),
        ("/opt/venv/bin/evidence-lab", "evidence-lab"),
        ("-c", "python -m lab"),
    ],
)
def test_prog_is_the_name_the_lab_was_invoked_by(argv0: str, prog: str) -> None:
    assert prog_name(argv0) == prog


def test_usage_of_python_m_lab_says_so() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lab", "run", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m lab run ")


def test_a_console_script_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/lab"])
    assert build_parser().format_usage().startswith("usage: lab ")


@pytest.mark.parametrize("shell", COMPLETION_SHELLS)
def test_completion_script(shell: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lab", "completion", shell],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    script = done.stdout
    for word in ("evaluate", "verify", "json", "sandbox", "pubkey", "best-effort"):
        assert word in script
    if shell == "bash":  # it completes the console script, one word on PATH
        assert script.rstrip().endswith("-F _shtab_lab lab")


def test_the_bash_completion_script_parses() -> None:
    script = subprocess.run(
        [sys.executable, "-m", "lab", "completion", "bash"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
