"""The sandbox's own small C programs, each built once per source digest into the lab's cache
directory (``lab.resources.cache_dir``): the system-call filter (``native/filter/lab-filter.c``,
``lab.sandbox.seccomp``) and the listening-socket helper (``native/listen/lab-listen.c``,
``lab.sandbox.netns``). A source that changes gets a new directory, so a cached program is
never stale; the build is ``cc -std=c11 -Wall -Wextra -Werror -O2``, as ``native/``'s.

    LISTEN = NativeHelper("lab-listen", "native/listen/lab-listen.c", packages="gcc")
    program = LISTEN.path()            # SandboxError naming the Debian packages if unbuildable
    LISTEN.digest()                    # the source's SHA-256
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from lab import resources
from lab.errors import SandboxError
from lab.host import procs

_lock = threading.Lock()


@dataclass(frozen=True)
class NativeHelper:
    """One C program of the sandbox: its name, its source (relative to the lab's data), the
    libraries it links and the Debian packages a failed build names."""

    name: str
    source_rel: str
    what: str
    packages: str = "gcc"
    libraries: tuple[str, ...] = ()
    _built: dict[str, Path] = field(default_factory=dict, compare=False, repr=False)

    def source(self) -> Path:
        return resources.path(self.source_rel)

    def source_bytes(self) -> bytes:
        src = self.source()
        try:
            return src.read_bytes()
        except OSError as exc:
            raise SandboxError(
                f"{self.what} source {src} cannot be read ({exc.strerror}); this installation "
                "of the lab is incomplete: reinstall it (or rebuild the image)."
            ) from None

    def digest(self) -> str:
        return hashlib.sha256(self.source_bytes()).hexdigest()

    def path(self) -> Path:
        """The built program (compiled on first use); raises SandboxError naming what is
        missing when it cannot be built."""
        digest = self.digest()[:16]
        with _lock:
            known = self._built.get(digest)
            if known is not None and known.is_file():
                return known
            target = resources.cache_dir() / f"{self.name}-{digest}" / self.name
            if not target.is_file():
                self._build(target)
            self._built[digest] = target
            return target

    def _build(self, target: Path) -> None:
        src = self.source()
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f"{self.name}.tmp{os.getpid()}")
        argv = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-o", str(staging)]
        try:
            procs.run(
                [*argv, str(src), *(f"-l{lib}" for lib in self.libraries)],
                purpose=f"build {self.what}",
                tool="cc",
                timeout=120,
            )
        except (procs.CommandFailed, OSError) as exc:
            raise SandboxError(
                f"{self.what} ({src}) could not be built ({exc}); install the Debian "
                f"packages {self.packages}."
            ) from None
        staging.chmod(0o755)
        staging.rename(target)


#: the system-call filter every client invocation runs under (lab.sandbox.seccomp)
FILTER = NativeHelper(
    "lab-filter",
    "native/filter/lab-filter.c",
    "the sandbox's system-call filter",
    packages="gcc and libseccomp-dev",
    libraries=("seccomp",),
)
#: binds a pass's listening sockets inside its network namespace (lab.sandbox.netns)
LISTEN = NativeHelper(
    "lab-listen", "native/listen/lab-listen.c", "the sandbox's listening-socket helper"
)
