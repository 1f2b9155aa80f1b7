"""The command line that runs one client invocation inside its sandbox, outermost first:

1. ``nsenter --net=/run/netns/NS`` (util-linux): the pass's network namespace, loopback only.
2. ``bwrap`` (bubblewrap), as root: new mount and PID namespaces (the client sees only its
   own processes; bwrap's init is pid 1 and reaps what it leaves); the root is an empty tmpfs with
   read-only binds of ``/usr`` (and the merged-/usr links), a few files of ``/etc``, a fresh
   ``/dev``, ``/proc``, the pass's read-only *box* (the client binary and the source copy, at
   the same path as on the host so that uprobes, strace's decoded paths and perf's symbol
   lookup agree) and the pass's writable home and ``/tmp`` (each a bounded tmpfs:
   ``lab.sandbox.boxfs``): what a client keeps between runs
   (a cache, a state file) persists across the invocations of a pass, as it would on one
   machine, and never from one pass to the next. The lab's files, the
   run and evidence directories, the receiver's store and the keys are simply not there.
   The environment is cleared but for an allow-list (``ENVIRONMENT``).
3. ``sh -c JOIN``: the shell remounts the sandbox's ``/proc`` ``hidepid=invisible`` (the
   client sees its own processes only), writes its own pid into the invocation's
   cgroup.procs files and execs the rest, so that the cgroup holds the client and its
   descendants and nothing of the instrument (the tracer and bwrap stay outside it).
4. ``capsh`` (libcap): the dedicated uid and gid, no supplementary groups, no
   capabilities (bounding, inheritable and ambient sets cleared), no_new_privs. Not util-linux
   ``setpriv``: it resolves even a numeric ``--reuid`` with ``getpwnam``, and glibc's NSS
   then connects to nscd's socket four times *inside the client's cgroup*, which every
   observer would rightly count as the client's own connects.
5. ``lab-filter`` (``lab.sandbox.seccomp``, bound read-only at ``/run/lab-filter``): a
   seccomp filter refusing, with EPERM and a kernel audit record each, the calls a backup
   client never needs; every later process inherits it. With a gate (``--gate=FD``,
   ``lab.sandbox.gate``) it first waits there until the lab has attached a tracer.
6. ``prlimit --core=0`` (and ``--nproc`` when no pids controller enforces ``pids_max``).
7. The client's own command line.

    argv = jail_argv(JailSpec(...), client_argv, status_fd=w)

bwrap reports its child's pid and the client's exit code on ``--json-status-fd`` (one JSON
object per line: ``{"child-pid": N}`` then ``{"exit-code": N}``; a signal N is reported as
128+N). With ``--unshare-pid`` that child is bwrap's init (pid 1 inside), whose first child
is the client's main process (pid 2 inside); ``exit-code`` comes as soon as that process
exits, whatever it left running.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import SandboxError
from lab.host import procs
from lab.sandbox.seccomp import INSIDE as FILTER_INSIDE
from lab.sandbox.seccomp import helper as filter_helper

#: the only environment a client sees (documented in docs/client-contract.md)
HOME = "/home/client"
ENVIRONMENT: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": HOME,
    "TMPDIR": "/tmp",
}
#: the files of /etc a dynamically linked program, a shell or a scripting runtime may need;
#: nothing else of /etc is visible (no keys, no host configuration)
ETC_FILES: tuple[str, ...] = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "protocols",
    "services",
    "localtime",
    "alternatives",
    "ssl",
)
#: the loopback resolver every client is given: a DNS lookup becomes a packet to this
#: address inside the namespace, which the capture sees (nothing listens there)
RESOLVER = "127.0.0.53"
#: successful execve(2) calls the sandbox's main process makes before the client's own: the
#: joining shell, capsh, the filter, prlimit (a syscall trace starts the client's part after)
JAIL_EXECS = 4
#: of those, the ones after the filter's gate (``JailSpec.gate_fd``): prlimit. A tracer
#: attached at the gate (``lab.sandbox.gate``) sees only these before the client's own
GATED_EXECS = 1
#: exit status of the shell step when it cannot hide the sandbox's init or join the cgroup
#: (the client never ran)
JOIN_FAILED = 125
#: $1 is util-linux mount: /proc is remounted hidepid=invisible, so that the client sees
#: only processes of its own uid (not bwrap's init, pid 1, whose command line names the
#: run's paths); then the shell joins the cgroup and execs the rest. The mount runs before
#: the join, so nothing of it is in the client's cgroup.
_JOIN = (
    '"$1" -o remount,hidepid=invisible /proc || exit ' + str(JOIN_FAILED) + "; shift; "
    'while [ "$1" != -- ]; do echo $$ > "$1" || exit ' + str(JOIN_FAILED) + "; shift; done; "
    'shift; exec "$@"'
)
#: top-level directories that may be links into /usr (merged /usr) or real directories
_USR_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True)
class JailSpec:
    """Everything the command line depends on, for one invocation."""

    #: the network namespace to enter; None keeps the lab's own network (an agent that
    #: talks to its model: ``lab campaign --agent-network host``, recorded)
    netns_path: Path | None
    uid: int
    gid: int
    #: read-only directory holding the client binary and the source (same path inside)
    box: Path
    #: the pass's writable directory (owned by the client user), mounted at HOME
    home: Path
    #: the pass's writable /tmp (owned by the client user)
    tmp: Path
    #: the resolv.conf given to the client
    resolv_conf: Path
    #: cgroup.procs files the client's first process joins
    join_files: tuple[Path, ...]
    #: the built system-call filter program (``lab.sandbox.seccomp.helper``), bound at
    #: ``FILTER_INSIDE``
    filter: Path
    #: RLIMIT_NPROC when no cgroup pids controller enforces the pids bound
    nproc: int | None = None
    #: paths to hide even if they fall inside a bound directory (the signing key file)
    masked: tuple[Path, ...] = field(default_factory=tuple)
    #: a writable directory bound at its own path and made the working directory (an
    #: agent's workspace); None runs in HOME
    workdir: Path | None = None
    #: variables set beside the allow-list (an agent's repetition number)
    extra_env: tuple[tuple[str, str], ...] = ()
    #: the gate's descriptor (``lab.sandbox.gate.Gate.jail_fd``): the filter step waits
    #: there until the lab has attached a tracer; None: no gate
    gate_fd: int | None = None


def _tool(name: str) -> str:
    return procs.which(name) or name


def _inside(name: str) -> str:
    """A tool that runs *inside* the jail, by its real path: only ``/usr`` (and the merged
    ``/bin``, ``/sbin``, ``/lib`` links) is visible there, so a PATH entry elsewhere (a
    symlink farm, a virtualenv) must resolve into it."""
    found = procs.which(name)
    if found is None:
        return name  # the sandbox probe names the missing package before any run
    real = os.path.realpath(found)
    if not real.startswith("/usr/"):
        raise SandboxError(
            f"{name} resolves to {real}, outside /usr, which is all the sandbox shows the "
            f"client; install it from its Debian package so that it lives under /usr."
        )
    return real


def jail_programs() -> tuple[str, ...]:
    """The programs the jail execs inside the client's cgroup before the client (the shell
    joins the cgroup, then execs these), by their host paths: a tracer's exec records hold
    them too."""
    own: tuple[str, ...]
    try:
        own = (str(filter_helper()),)
    except SandboxError:  # no filter, no sandbox: nothing of it is ever exec'd
        own = ()
    return (_inside("capsh"), *own, _inside("prlimit"))


class _Tree:
    """The bwrap operations that build the sandbox's file tree, in order.

    bwrap makes the missing parents of a mount point with the mode of the *source's*
    parents (a root-only 0700 scratch directory, say), which would leave ``/etc``, ``/home``
    or the box unreachable to the client: every parent is made first, 0755, explicitly."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.made: set[str] = {"/"}

    def parents(self, dest: str) -> None:
        for parent in reversed(Path(dest).parents):
            if str(parent) not in self.made:
                self.args += ["--perms", "0755", "--dir", str(parent)]
                self.made.add(str(parent))

    def op(self, *words: str) -> None:
        """One operation whose last word is its destination."""
        self.parents(words[-1])
        self.args += list(words)
        self.made.add(words[-1])


def root_binds(tree: _Tree, root: Path = Path("/")) -> None:
    """``/usr`` read-only, and each top-level lib/bin directory as the link it is on a
    merged-/usr system or as a read-only bind otherwise."""
    tree.op("--ro-bind", "/usr", "/usr")
    for name in _USR_LINKS:
        path = root / name
        if path.is_symlink():
            tree.op("--symlink", os.readlink(path), f"/{name}")
        elif path.is_dir():
            tree.op("--ro-bind", f"/{name}", f"/{name}")


def etc_binds(tree: _Tree, resolv_conf: Path, root: Path = Path("/")) -> None:
    for name in ETC_FILES:
        if (root / "etc" / name).exists():
            tree.op("--ro-bind", f"/etc/{name}", f"/etc/{name}")
    tree.op("--ro-bind", str(resolv_conf), "/etc/resolv.conf")


def _bound_sources(spec: JailSpec) -> list[Path]:
    """Host directories the tree binds into the sandbox (besides /usr and /etc files)."""
    found = [spec.tmp, spec.box, spec.home, *(p.parent for p in spec.join_files)]
    return found + ([] if spec.workdir is None else [spec.workdir])


def _under_any(path: Path, roots: Sequence[Path]) -> bool:
    real = os.path.realpath(path)
    return any(
        real == os.path.realpath(root) or real.startswith(os.path.realpath(root) + "/")
        for root in roots
    ) or real.startswith(("/usr/", "/etc/"))


def jail_argv(spec: JailSpec, client_argv: Sequence[str], *, status_fd: int) -> list[str]:
    tree = _Tree()
    root_binds(tree)
    etc_binds(tree, spec.resolv_conf)
    tree.op("--dev", "/dev")
    tree.op("--proc", "/proc")
    tree.op("--bind", str(spec.tmp), "/tmp")
    tree.op("--ro-bind", str(spec.box), str(spec.box))
    tree.op("--bind", str(spec.home), HOME)
    tree.op("--ro-bind", str(spec.filter), FILTER_INSIDE)
    for path in spec.join_files:
        tree.op("--bind", str(path.parent), str(path.parent))
    if spec.workdir is not None:
        tree.op("--bind", str(spec.workdir), str(spec.workdir))
    for path in spec.masked:
        # a secret outside every bound directory is simply not there, and its path is
        # never written into bwrap's argv; one inside a bound directory (an agent's
        # workspace, say) is hidden under /dev/null
        if path.is_file() and _under_any(path, _bound_sources(spec)):
            tree.op("--ro-bind", "/dev/null", str(path))
    argv = [] if spec.netns_path is None else [_tool("nsenter"), f"--net={spec.netns_path}", "--"]
    argv += [_tool("bwrap"), *tree.args]
    # a PID namespace: the client sees only its own processes (no host command line, no
    # path of the run); bwrap's own init is its pid 1 and reaps what it leaves, so processes
    # the client leaves behind live on after it exits, observed, until the supervisor
    # kills the cgroup (no --die-with-parent: that would kill them with bwrap at once,
    # before they are seen; lab.sandbox.supervise)
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "lab-sandbox"]
    argv += ["--new-session", "--clearenv"]
    for key, value in (*ENVIRONMENT.items(), *spec.extra_env):
        argv += ["--setenv", key, value]
    chdir = HOME if spec.workdir is None else str(spec.workdir)
    argv += ["--chdir", chdir, "--json-status-fd", str(status_fd), "--"]
    argv += ["/bin/sh", "-c", _JOIN, "sh", _inside("mount"), *map(str, spec.join_files), "--"]
    # capsh runs --shell with the words after "--"; the order of its options is the order
    # of the operations: drop the bounding set while still privileged, then the ids
    argv += [
        _inside("capsh"),
        "--drop=all",
        f"--gid={spec.gid}",
        "--groups=",
        f"--uid={spec.uid}",
        "--inh=",
        "--noamb",
        "--no-new-privs",
        f"--shell={FILTER_INSIDE}",
        "--",
        *([] if spec.gate_fd is None else [f"--gate={spec.gate_fd}"]),
        _inside("prlimit"),
        "--core=0",
    ]
    if spec.nproc is not None:
        argv.append(f"--nproc={spec.nproc}")
    argv += ["--", *client_argv]
    return argv


def resolv_conf_text() -> str:
    return (
        "# written by the Execution Evidence Lab: a lookup goes to this loopback address\n"
        "# inside the sandbox's network namespace, where the packet capture sees it\n"
        f"nameserver {RESOLVER}\noptions timeout:1 attempts:1\n"
    )
