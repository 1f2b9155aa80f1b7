"""The lab installs: a wheel built from this checkout, installed into a fresh virtual
environment outside it, runs ``lab --help``, ``lab doctor --json`` and an untraced
``lab run baseline`` from a directory that holds no checkout.

The wheel carries the scenarios, probes, native sources, schemas and documents the lab reads
(``lab/_data/*`` links to the top-level directories, followed by the build); the installed lab
builds its seeded client into its cache directory on first use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, require

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: the build backend (setuptools) is the one this interpreter has,
    # so building needs no package index
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(ROOT)],
        check=True, capture_output=True, cwd=out,
    )  # fmt: skip
    (found,) = out.glob("execution_evidence_lab-*.whl")
    return found


def test_wheel_holds_what_the_lab_reads(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "lab/_data/native/Makefile",
        "lab/_data/native/main.c",
        "lab/_data/native/client.h",
        "lab/_data/native/reference/uploader.c",
        "lab/_data/probes/client.bt",
        "lab/_data/scenarios/baseline.yaml",
        "lab/_data/docs/client-contract.md",
        "lab/_data/docs/protocol.md",
        "lab/_data/campaigns/speedup.yaml",
        "lab/schemas/results.schema.json",
        "lab/py.typed",
    }
    assert expected <= names, sorted(expected - names)
    # every module of the package is in it: discovery, not a hand list
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "lab").rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    # nothing built in a checkout leaks into the wheel
    assert not [n for n in names if n.endswith((".o", "backup-client"))]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("venv") / "lab-venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    done = subprocess.run([*pip, str(wheel)], capture_output=True, text=True, timeout=600)
    require(
        "pypi",
        done.returncode == 0,
        f"the wheel's dependencies could not be installed: {done.stderr.strip()[-300:]}",
    )
    return env_dir


def lab(
    env_dir: Path, *args: str, cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["XDG_CACHE_HOME"] = str(cwd / "cache")
    return subprocess.run(
        [str(env_dir / "bin" / "lab"), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_installed_lab_help_and_doctor(installed: Path, tmp_path: Path) -> None:
    done = lab(installed, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "doctor" in done.stdout and "evaluate" in done.stdout
    done = lab(installed, "doctor", "--json", cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    document = json.loads(done.stdout)
    assert "strace" in json.dumps(document)
    # the lab imported is the installed one, not this checkout
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import lab; print(lab.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(installed) in where.stdout and str(ROOT) not in where.stdout


def test_installed_lab_runs_baseline(installed: Path, tmp_path: Path) -> None:
    require(
        "cc",
        shutil.which("make") is not None and shutil.which("cc") is not None,
        "make or a C compiler is missing (apt-get install gcc make libssl-dev)",
    )
    require("root", os.geteuid() == 0, "the client sandbox needs root")
    out = tmp_path / "artifacts"
    done = lab(installed, "run", "baseline", "--out", str(out), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)
    # untraced: the expectations only a tracer can check are not observed, none is missed
    assert document["ok"] and document["calibration"]["not_met"] == 0
    assert document["calibration"]["met"] > 0
    run_dir = Path(document["run_dir"])
    results = json.loads((run_dir / "results.json").read_text())
    (baseline,) = results["scenarios"]
    figures = [i["receiver"]["payload_bytes_consumed"] for i in baseline["invocations"]]
    assert figures == [524288, 0]
    # the seeded client was built from the packaged sources into the cache, not the checkout
    built = list((tmp_path / "cache" / "execution-evidence-lab").glob("native-*/backup-client"))
    assert len(built) == 1
