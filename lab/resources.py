"""Where the lab's own inputs are: scenarios, probes, the native client's sources, the public
contract's documents and the shipped campaign tasks.

    from lab import resources
    resources.scenarios_dir()          # <checkout>/scenarios, or the copy inside the wheel
    resources.probes_dir()             # the bpftrace scripts
    resources.native_client()          # the seeded client, built on first use when installed

In a checkout these are the repository's own top-level directories (the product's layout puts
``native/``, ``probes/`` and ``scenarios/`` there). An installed wheel carries the same files
as package data: ``lab/_data/<name>`` are symbolic links to the top-level directories, which
the wheel build follows, so nothing is moved and nothing is copied by hand. The installed
copy is read-only (site-packages), so the seeded client is built into a per-user cache
directory named by the digest of its sources.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from importlib import resources as importlib_resources
from pathlib import Path

from lab.errors import LabError
from lab.host import procs

#: the directories the lab reads, and the file each must hold to count as present
_MARKERS: dict[str, str] = {
    "native": "Makefile",
    "probes": "client.bt",
    "scenarios": "baseline.yaml",
    "docs": "client-contract.md",
    "campaigns": "speedup.yaml",
}


class ResourceMissingError(LabError):
    """The lab's own data is missing from its installation."""


def checkout() -> Path | None:
    """The repository the running ``lab`` package sits in, or None when it is installed."""
    root = Path(__file__).resolve().parent.parent
    if all((root / name / marker).is_file() for name, marker in _MARKERS.items()):
        return root
    return None


def _installed(name: str) -> Path:
    base = Path(str(importlib_resources.files("lab"))) / "_data" / name
    if not (base / _MARKERS[name]).is_file():
        raise ResourceMissingError(
            f"lab/_data/{name}/{_MARKERS[name]} is missing from this installation of the lab; "
            "reinstall it from a wheel built with 'pip wheel .' or run it from a checkout."
        )
    return base


def data_dir(name: str) -> Path:
    """The directory ``name`` (one of native, probes, scenarios, docs, campaigns)."""
    if name not in _MARKERS:
        raise KeyError(name)
    root = checkout()
    return root / name if root is not None else _installed(name)


def scenarios_dir() -> Path:
    return data_dir("scenarios")


def probes_dir() -> Path:
    return data_dir("probes")


def native_dir() -> Path:
    return data_dir("native")


def docs_dir() -> Path:
    return data_dir("docs")


def campaigns_dir() -> Path:
    return data_dir("campaigns")


def _sources_digest(native: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in native.rglob("*") if p.is_file()):
        rel = path.relative_to(native).as_posix()
        if path.suffix in {".o"} or rel == "backup-client":
            continue
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """Where an installed lab keeps what it builds (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "execution-evidence-lab"


def native_build_dir() -> Path:
    """The directory the seeded client is built in: ``native/`` in a checkout, else a cache
    copy of the packaged sources keyed by their digest (built with ``make`` on first use)."""
    native = native_dir()
    if checkout() is not None:
        return native
    target = cache_dir() / f"native-{_sources_digest(native)}"
    if not (target / "Makefile").is_file():
        staging = target.with_name(target.name + f".tmp{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(native, staging, ignore=shutil.ignore_patterns("*.o", "backup-client"))
        try:
            staging.rename(target)
        except OSError:  # another process made it first: theirs is the same sources
            shutil.rmtree(staging, ignore_errors=True)
    return target


def native_client() -> Path:
    """The seeded client's path. In a checkout it is built with ``make -C native`` by whoever
    works there (a missing one is named by the run); an installed lab builds it on first use
    from the packaged sources, into its cache directory."""
    build_dir = native_build_dir()
    client = build_dir / "backup-client"
    if checkout() is None and not client.is_file():
        try:
            procs.run(
                ["make", "-s", "-C", str(build_dir)],
                purpose="build the seeded client from the installed sources",
                tool="make",
                timeout=300,
                accept=(0,),
            )
        except procs.CommandFailed as exc:
            raise ResourceMissingError(
                f"building the seeded client in {build_dir} failed "
                f"({exc.completed.stderr_excerpt() or 'no output'}); install gcc, make and "
                "libssl-dev, then run the lab again."
            ) from None
    return client


def path(rel: str) -> Path:
    """A repository-relative path of the lab's data (``native/main.c``, ``docs/protocol.md``)
    wherever the data is: the checkout, or the installed copy."""
    top, _, rest = rel.partition("/")
    return data_dir(top) / rest if rest else data_dir(top)


def package_root() -> Path:
    """The directory holding the ``lab`` package: the checkout, or site-packages. Module
    paths such as ``lab/workloads/backup/contract.py`` are relative to it."""
    return Path(__file__).resolve().parent.parent
