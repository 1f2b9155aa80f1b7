"""The one table of external tools and the Debian packages that provide them.

    from lab.host.tools import package_for
    package_for("perf")                    # "linux-perf", for a "not installed" sentence

    python3 -I lab/host/tools.py           # every package a full test machine needs, one line

This module imports nothing, not even from the standard library, so a bare ``python3`` can read
it before anything else is installed: ``.ci/run`` runs it as a script for its ``apt-get``
line and ``noxfile.py`` loads it by path. :mod:`lab.host.procs` names the package in its
"not installed" messages from here.
"""

from __future__ import annotations  # a compiler directive, not an import: nothing is loaded

#: command on PATH -> the Debian package that provides it
TOOL_PACKAGES: dict[str, str] = {
    # building and patching the native client (and a candidate)
    "cc": "gcc",
    "gcc": "gcc",
    "make": "make",
    "nm": "binutils",
    "patch": "patch",
    "git": "git",
    "openssl": "openssl",
    # building and judging a Go task (safe-store): Debian's Go 1.19
    "go": "golang-go",
    # the observers
    "strace": "strace",
    "bpftrace": "bpftrace",
    "perf": "linux-perf",
    "tcpdump": "tcpdump",
    # verifying archives the way a reviewer does, and reading the PDF report in tests
    "signify-openbsd": "signify-openbsd",
    "minisign": "minisign",
    "busybox": "busybox",  # its sha256sum -c reads only GNU lines (Alpine's, for one)
    "pdftoppm": "poppler-utils",
    # rendering report.html in a real browser in tests (headless, no network)
    "chromium": "chromium",
    # the container and its base image
    "docker": "docker.io",
    "dockerd": "docker.io",
    "debootstrap": "debootstrap",
    # network namespaces and process inspection
    "ip": "iproute2",
    "ps": "procps",
    # the client sandbox: bwrap, util-linux's nsenter and prlimit, capsh, useradd
    "bwrap": "bubblewrap",
    "setpriv": "util-linux",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "prlimit": "util-linux",
    "capsh": "libcap2-bin",
    "useradd": "passwd",
}

#: tools installed through ``invoke lab.build`` (it also starts the daemon), never by the
#: nox test sessions on a developer's machine
ENGINE_TOOLS: tuple[str, ...] = ("docker", "dockerd")

#: header file -> the Debian package that provides it (the compiler needs them)
HEADER_PACKAGES: dict[str, str] = {
    "/usr/include/openssl/evp.h": "libssl-dev",
    "/usr/include/stdio.h": "libc6-dev",
    # the sandbox's system-call filter (native/filter/lab-filter.c, lab/sandbox/seccomp.py)
    "/usr/include/seccomp.h": "libseccomp-dev",
}

#: font file -> the Debian package that provides it (the PDF report embeds these TrueType
#: fonts; ``lab.reports.fonts`` reads them from here)
FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONT_PACKAGES: dict[str, str] = {
    f"{FONT_DIR}/DejaVuSans.ttf": "fonts-dejavu-core",
    f"{FONT_DIR}/DejaVuSans-Bold.ttf": "fonts-dejavu-core",
    # the oblique faces are not in -core (measured: the lab image had no DejaVuSans-Oblique)
    f"{FONT_DIR}/DejaVuSans-Oblique.ttf": "fonts-dejavu-extra",
    f"{FONT_DIR}/DejaVuSans-BoldOblique.ttf": "fonts-dejavu-extra",
    f"{FONT_DIR}/DejaVuSansMono.ttf": "fonts-dejavu-core",
}

#: packages with no command of their own to look for (the debootstrap base fetches over TLS)
OTHER_PACKAGES: tuple[str, ...] = ("ca-certificates",)


def package_for(tool: str) -> str | None:
    """The Debian package that provides ``tool``, or None when the table does not know it."""
    return TOOL_PACKAGES.get(tool)


def host_tools() -> dict[str, str]:
    """Tool -> package for everything the nox test sessions install when it is missing."""
    return {t: p for t, p in TOOL_PACKAGES.items() if t not in ENGINE_TOOLS}


def all_packages() -> list[str]:
    """Every package a full test machine needs (``.ci/run`` installs exactly these)."""
    return sorted(
        {
            *TOOL_PACKAGES.values(),
            *HEADER_PACKAGES.values(),
            *FONT_PACKAGES.values(),
            *OTHER_PACKAGES,
        },
    )


if __name__ == "__main__":
    print(" ".join(all_packages()))
