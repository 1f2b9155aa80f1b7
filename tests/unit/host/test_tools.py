"""lab.host.tools: the one tool -> Debian package table, readable by a bare python3."""

from __future__ import annotations

import ast
import runpy
import shutil
import subprocess
import sys

import pytest

from lab.errors import ToolMissingError
from lab.host import procs, tools
from tests.conftest import ROOT, require

TOOLS_FILE = ROOT / "lab" / "host" / "tools.py"
#: what .ci/run installed before the table existed, plus what the sandbox needs
CI_PACKAGES = [
    "gcc",
    "make",
    "libc6-dev",
    "libssl-dev",
    "openssl",
    "binutils",
    "patch",
    "git",
    "strace",
    "bpftrace",
    "linux-perf",
    "tcpdump",
    "signify-openbsd",
    "minisign",
    "poppler-utils",
    "docker.io",
    "debootstrap",
    "ca-certificates",
    "iproute2",
    "procps",
    "bubblewrap",
    "util-linux",
]


def test_every_ci_package_is_in_the_table() -> None:
    assert set(CI_PACKAGES) <= set(tools.all_packages())
    assert tools.all_packages() == sorted(set(tools.all_packages()))


def test_sandbox_tools_name_their_packages() -> None:
    assert tools.package_for("bwrap") == "bubblewrap"
    for tool in ("setpriv", "unshare", "nsenter"):
        assert tools.package_for(tool) == "util-linux"
    assert tools.package_for("no-such-tool") is None


def test_the_module_imports_nothing() -> None:
    """.ci/run reads it before the lab's dependencies (or the lab) are installed."""
    tree = ast.parse(TOOLS_FILE.read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in imports)


def test_a_bare_python_prints_the_apt_line() -> None:
    done = subprocess.run(
        [sys.executable, "-I", str(TOOLS_FILE)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == tools.all_packages()


def test_ci_and_nox_read_the_table() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -I lab/host/tools.py" in ci
    assert "linux-perf" not in ci and "signify-openbsd" not in ci  # no second list
    loaded = runpy.run_path(str(TOOLS_FILE))
    assert loaded["host_tools"]() == tools.host_tools()
    assert "docker" not in tools.host_tools()  # lab.build installs the engine
    nox_text = (ROOT / "noxfile.py").read_text()
    assert "lab/host/tools.py" in nox_text.replace('" / "', "/") and "linux-perf" not in nox_text


def test_missing_tool_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "which", lambda tool: None)
    with pytest.raises(ToolMissingError, match="'linux-perf'"):
        procs.require_tool("perf")


def test_the_pdf_fonts_are_in_the_table_and_pinned_in_the_image() -> None:
    """The font packages: installed by .ci/run and nox, asked for and pinned by the image."""
    packages = set(tools.FONT_PACKAGES.values())
    assert packages == {"fonts-dejavu-core", "fonts-dejavu-extra"}
    assert packages <= set(tools.all_packages())
    wanted = [
        line.strip()
        for line in (ROOT / "docker" / "apt-packages.in").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    pins = dict(
        line.split("=", 1)
        for line in (ROOT / "docker" / "apt-packages.lock").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert packages <= set(wanted)
    assert all(name in pins for name in wanted), "run 'invoke image.lock' to relock"
    assert {pins[p] for p in packages} == {"2.37-6"}  # Debian 12's version


def test_each_font_file_comes_from_the_package_the_table_names() -> None:
    # the table once named -core for the oblique faces, which -extra ships: the image lacked them
    dpkg = shutil.which("dpkg-query")
    require("dpkg", dpkg is not None, "no dpkg-query: not a Debian machine")
    assert dpkg is not None
    for path, package in tools.FONT_PACKAGES.items():
        found = subprocess.run([dpkg, "-S", path], capture_output=True, text=True)
        owners = {line.split(":", 1)[0] for line in found.stdout.splitlines()}
        if found.returncode == 0:  # installed here (CI installs every package of the table)
            assert owners == {package}, (path, owners)
