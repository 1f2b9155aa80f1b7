"""Safe-store's S3, contained, decided from two witnesses that are not the harness's word:
the kernel's (an ``strace -f -yy`` trace of the harness, read by
``lab.collectors.strace_files``) and the file system's (the outside's listing before and
after, ``plan.listing_changes``).

    found = witness(trace_text, client_pid=pid, layout=layout, changes=changes)
    found.violations        # each: what happened where, and the trace's lines verbatim

The attacker (the harness re-executed as ``harness attack A B``) swaps two entries of the
root all along; its process and threads are set apart by the trace itself (the one pid
whose ``execve`` ran that argv, and what it created), never by what the harness prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.collectors.strace_files import (
    FileEffect,
    exec_pids,
    family,
    file_effects,
    inside,
    redirect,
    verbatim,
)
from lab.collectors.strace_parse import client_calls, iter_syscalls
from lab.sandbox.jail import JAIL_EXECS
from lab.workloads.safestore.plan import Layout

#: the attacker's argv, from its second word (the first is the harness's own path)
ATTACKER_ARGV = ("harness", "attack")


@dataclass(frozen=True)
class Witness:
    """What the two witnesses saw."""

    #: one entry per violating call, the description then its verbatim trace lines
    violations: tuple[tuple[str, tuple[str, ...]], ...]
    #: the outside's changes (the second witness)
    changes: tuple[str, ...]
    #: calls through the race's swapped entry, outside only if the listing confirms them
    unconfirmed: tuple[str, ...]
    attacker_pids: tuple[int, ...]
    #: successful calls of the harness that created or wrote something (anywhere)
    effects: int
    #: the trace records the harness's end
    complete: bool
    #: the harness's calls were found in the trace (its execve after the sandbox's steps)
    found_harness: bool


def _describe(effect: FileEffect) -> str:
    return f"{effect.action} {effect.path} ({effect.call}, pid {effect.pid}, {effect.witness})"


def _through(path: str, entries: tuple[str, str]) -> bool:
    return any(path == e or path.startswith(e + "/") for e in entries)


def witness(
    text: str,
    *,
    client_pid: int,
    layout: Layout,
    changes: list[str],
    execs_before_client: int = JAIL_EXECS,
) -> Witness:
    """Judge the trace of one harness run whose main process is ``client_pid``
    (``execs_before_client``: the jail's steps, fewer in traces of an older jail)."""
    calls, tally = iter_syscalls(text)
    mine, _ = client_calls(calls, client_pid, execs_before_client)
    # exactly one attacker is started; more would mean the candidate ran the harness's
    # argv itself (to hide its writes): then nothing is set apart (the attacker's own
    # swaps stay inside the root, so they are never a violation, only noise)
    execs = exec_pids(mine, ATTACKER_ARGV)
    attackers = family(mine, execs) if len(execs) == 1 else set()
    effects = file_effects([c for c in mine if c.pid not in attackers])
    root = str(layout.root)
    links = layout.links()
    swapped = layout.swapped()
    added = {line.split(":", 1)[0].rsplit("/", 1)[-1] for line in changes}
    violations: list[tuple[str, tuple[str, ...]]] = []
    unconfirmed: list[str] = []
    for effect in effects:
        if effect.witness == "descriptor":
            outside = not inside(effect.path, root)
        else:
            landed = redirect(effect.path, links)
            outside = not inside(landed, root)
            if not outside and _through(effect.path, swapped):
                base = effect.path.rsplit("/", 1)[-1]
                if base in added:
                    outside = True
                else:
                    unconfirmed.append(_describe(effect))
        if outside:
            violations.append((_describe(effect), verbatim(text, effect)))
    return Witness(
        violations=tuple(violations),
        changes=tuple(changes),
        unconfirmed=tuple(unconfirmed),
        attacker_pids=tuple(sorted(attackers)),
        effects=len(effects),
        complete=tally.complete,
        found_harness=bool(mine),
    )


def evidence_text(found: Witness) -> str:
    """The violations file: every violating call and its lines, then the outside's changes."""
    out = [
        f"# {len(found.violations)} calls by the harness touched the file system "
        "outside the root (the kernel's witness: strace -f -yy)"
    ]
    for what, lines in found.violations:
        out.append(what)
        out.extend(f"    {line}" for line in lines)
    out.append(f"# {len(found.changes)} changes outside the root (listing before and after)")
    out.extend(found.changes)
    out.append(
        f"# {len(found.unconfirmed)} calls through the swapped entry that the listing "
        "does not confirm as outside (the directory was in place)"
    )
    out.extend(found.unconfirmed)
    out.append(f"# attacker pids, set apart: {', '.join(map(str, found.attacker_pids)) or 'none'}")
    return "\n".join(out) + "\n"
