"""The agent command, run in the sandbox a client runs in, with its workspace as its
directory, its output streamed live and kept, and the budget as its only limit.

    argv, files = agent_argv("sh my-agent.sh", box, cwd=Path.cwd())   # my-agent.sh copied
    run = run_agent(sandbox, argv, workspace=ws.root, box=box, home=home, tmp=tmp,
                    repetition=1, budget_s=1800, network="host",
                    stdout=rep_dir / "agent.stdout", stderr=rep_dir / "agent.stderr",
                    echo=print)                     # "[r1] ..." / "[r1 err] ..." as they come
    run.exit_status, run.timed_out, run.wall_s, run.lingering_count

Where it runs: the dedicated client user, no capabilities, ``no_new_privs``, a cgroup of its
own (killed as a whole at the budget, and whatever outlives the agent's main process is
killed a second after it exits), a new root holding read-only ``/usr`` and a few files of
``/etc``, a writable home and ``/tmp``, its workspace bound writable at its own path and
made its working directory, and the files its command names, by a relative or an absolute
path outside ``/usr`` (copied into a read-only box).
The lab, its scenarios, its run directory and the keys are not there. ``--agent-network
host`` keeps the machine's network (an agent talks to its model) with the host's
``resolv.conf``; ``none`` gives it a namespace with loopback only.

The agent's environment is the client's allow-list plus ``LAB_REPETITION`` (1…N),
``LAB_TASK`` (``TASK.md``) and the variables named by ``--agent-env`` (recorded by name).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from lab.campaign.forward import EgressWitness
from lab.campaign.watch import ProcessWitness
from lab.errors import CampaignError
from lab.evaluate.candidate import MakeRunner
from lab.host import procs
from lab.model.egress import parse_network
from lab.sandbox import Outcome, Sandbox, boxfs, cell_dirs, seccomp
from lab.sandbox import netns as netns_mod
from lab.sandbox.cgroup import opaque_name
from lab.sandbox.jail import JailSpec, jail_argv, resolv_conf_text
from lab.sandbox.supervise import supervise

HOST_RESOLV_CONF = Path("/etc/resolv.conf")
#: where ``lab campaign`` run in the lab image finds the files the agent command names
MOUNTED = Path("/lab/campaign-input/agent")
#: control characters other than tab, dropped from what is echoed (never from the files)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def names_file(word: str, cwd: Path) -> Path | None:
    """The regular file a word of the agent command names and the sandbox would not show
    as it is: relative to ``cwd`` (``my-agent.sh``) or absolute (``/home/me/agent.sh``,
    what people type), but not under ``/usr`` (the sandbox shows ``/usr`` read-only, so
    ``/bin/true`` stays as it is). None for options, directories and anything else."""
    if not word or word.startswith("-"):
        return None
    path = (cwd / word).resolve()
    if not path.is_file() or path.is_relative_to("/usr"):
        return None
    return path


def agent_argv(command: str, box: Path, *, cwd: Path) -> tuple[list[str], dict[str, str]]:
    """The agent command as ``sh -c`` in the sandbox. Each word of it that names a regular
    file (:func:`names_file`: relative or absolute, outside ``/usr``) is copied into
    ``box`` (read-only in the sandbox) and the word is rewritten to that copy; other words
    are left as they are. Returns the argv and each copied file's name -> SHA-256."""
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise CampaignError(f"--agent-cmd {command!r} is not a command line: {error}.") from None
    if not words:
        raise CampaignError("--agent-cmd is empty; give the command that runs the agent.")
    files: dict[str, str] = {}
    rewritten = []
    for word in words:
        path = names_file(word, cwd)
        if path is not None:
            dest = box / path.name
            if path.name in files and dest.read_bytes() != path.read_bytes():
                raise CampaignError(
                    f"--agent-cmd names two different files called {path.name!r}; rename one."
                )
            if path.name not in files:
                shutil.copyfile(path, dest)
                dest.chmod(0o555)
                files[path.name] = hashlib.sha256(dest.read_bytes()).hexdigest()
            rewritten.append(str(dest))
        else:
            rewritten.append(word)
    return ["/bin/sh", "-c", shlex.join(rewritten)], files


class LineEcho:
    """Chunks of one stream -> whole lines, prefixed, handed to ``echo`` as they complete
    (a long run shows its progress as it happens, never only at the end)."""

    _lock = threading.Lock()

    def __init__(self, prefix: str, echo: Callable[[str], None]) -> None:
        self.prefix = prefix
        self.echo = echo
        self.buffer = b""

    def __call__(self, chunk: bytes) -> None:
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self._say(line)
        if len(self.buffer) > 4096:  # a line without end: shown in pieces
            self._say(self.buffer)
            self.buffer = b""

    def flush(self) -> None:
        if self.buffer:
            self._say(self.buffer)
            self.buffer = b""

    def _say(self, line: bytes) -> None:
        text = _CONTROL.sub("", line.decode("utf-8", "replace").rstrip("\r"))
        with self._lock:
            self.echo(f"{self.prefix} {text}")


def run_agent(
    sandbox: Sandbox,
    argv: list[str],
    *,
    workspace: Path,
    box: Path,
    home: Path,
    tmp: Path,
    repetition: int,
    budget_s: float,
    network: str,
    stdout: Path,
    stderr: Path,
    echo: Callable[[str], None],
    label: str = "agent",
    env: tuple[tuple[str, str], ...] = (),
    witness: EgressWitness | None = None,
    processes: ProcessWitness | None = None,
) -> Outcome:
    """``label`` names the command log's entry (``agent``, or ``build`` when the candidate's
    ``make`` runs here too); the cgroup's name is opaque. With ``witness`` (``--agent-network
    model=HOST:PORT``) the agent gets a namespace of its own whose only way out is the
    witness's forwarders; its record is ``witness.record`` once this returns. With
    ``processes`` every exec of the agent's cgroup is traced and its HOME and /tmp listed
    afterwards (``processes.record``)."""
    group = sandbox.run_group.invocation(opaque_name())
    namespace: netns_mod.NetworkNamespace | None = None
    try:
        if network == "none" or witness is not None:
            namespace = netns_mod.NetworkNamespace(
                netns_mod.name_for(f"{label}-r{repetition}"), log=sandbox.log
            )
            namespace.create()
            if witness is not None:
                witness.open(namespace)
            (box / "resolv.conf").write_text(resolv_conf_text(), encoding="ascii")
            resolv = box / "resolv.conf"
        else:
            resolv = HOST_RESOLV_CONF if HOST_RESOLV_CONF.exists() else box / "resolv.conf"
            if not resolv.exists():
                resolv.write_text(resolv_conf_text(), encoding="ascii")
        spec = JailSpec(
            netns_path=None if namespace is None else namespace.path,
            uid=sandbox.user.uid,
            gid=sandbox.user.gid,
            box=box,
            home=home,
            tmp=tmp,
            resolv_conf=resolv,
            join_files=tuple(group.join_files()),
            filter=sandbox.filter,
            nproc=sandbox.nproc_fallback(),
            masked=sandbox.masked,
            workdir=workspace,
            extra_env=(*env, ("LAB_REPETITION", str(repetition)), ("LAB_TASK", "TASK.md")),
        )
        if processes is not None:
            processes.open(group.v2)
        out = LineEcho(f"[r{repetition}]", echo)
        err = LineEcho(f"[r{repetition} err]", echo)
        watch = seccomp.KmsgWatch.open()
        outcome = supervise(
            argv_for=lambda fd: jail_argv(spec, argv, status_fd=fd),
            group=group,
            timeout_s=budget_s,
            linger_grace_s=sandbox.settings.linger_grace_s,
            stdout=stdout,
            stderr=stderr,
            purpose=f"{label}, repetition {repetition}",
            log=sandbox.log,
            head=sandbox.settings.output_head,
            tail=sandbox.settings.output_tail,
            echo=(out, err),
        )
        out.flush()
        err.flush()
        outcome.refused = sandbox.refusals(watch)
        return outcome
    finally:
        group.kill()
        with contextlib.suppress(OSError):
            group.remove()
        if processes is not None:
            processes.close(home=home, tmp=tmp)
        if witness is not None and witness.forwarders:
            witness.close(calls=None if processes is None else processes.calls)
        if namespace is not None:
            namespace.delete()


def sandboxed_make(sandbox: Sandbox, repetition: int, tree: Path) -> MakeRunner:
    """``lab evaluate``'s build step run where the agent ran: the Makefile and whatever it
    calls are the agent's code, so ``make`` runs in the sandbox, as the client user, with
    ``tree`` (the patched copy) writable and no network."""

    def run(argv: list[str], stdout: Path, stderr: Path, limit: float) -> tuple[int | None, bool]:
        for path in [tree, *tree.rglob("*")]:
            os.lchown(path, sandbox.user.uid, sandbox.user.gid)
        scratch = Path(tempfile.mkdtemp(prefix="lab-build-"))
        try:
            box, home, tmp = cell_dirs(scratch, sandbox)
            ran = run_agent(
                sandbox,
                argv,
                workspace=tree,
                box=box,
                home=home,
                tmp=tmp,
                repetition=repetition,
                budget_s=limit,
                network="none",
                stdout=stdout,
                stderr=stderr,
                echo=lambda line: None,
                label="build",
            )
        finally:
            boxfs.remove_tree(scratch, log=sandbox.log)
        return (None if ran.timed_out else ran.exit_status), ran.timed_out

    return run


def egress_witness(
    network: str, rep_dir: Path, run_dir: Path, log: procs.CommandLog
) -> EgressWitness | None:
    """The witness of a repetition's network when ``--agent-network model=HOST:PORT``."""
    endpoints = parse_network(network)
    if not endpoints:
        return None
    return EgressWitness(endpoints, out_dir=rep_dir / "egress", run_dir=run_dir, log=log)
