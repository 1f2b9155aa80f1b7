"""The lab's single error hierarchy.

Every error a user can hit is a :class:`LabError` whose message is one sentence naming the
file, key, tool or member at fault and what to do. ``python -m lab`` catches ``LabError`` in
exactly one place (``lab._cli.main``) and turns it into that sentence and an exit code.
The two subclasses that carry a record live beside it: ``lab.host.procs.CommandFailed``
(the finished command) and ``lab.evidence.checks.VerificationError`` (every check of a
rejected archive, which ``lab verify`` prints before the sentence).

    >>> from lab.errors import ScenarioError
    >>> raise ScenarioError("scenarios/x.yaml: key 'client.behavior' is missing; add it.")
"""

from __future__ import annotations


class LabError(Exception):
    """Base class: ``str(error)`` is the one sentence shown to the user."""

    #: process exit status used by the CLI for this class of error
    exit_code: int = 2

    def diagnostics(self) -> str:
        return str(self)


class UsageError(LabError):
    """Bad command-line usage or option combination."""


class ScenarioError(LabError):
    """A scenario file is missing, unreadable, not YAML, or fails validation."""


class ToolMissingError(LabError):
    """An external tool is not installed; the message names the Debian package."""


class CapabilityError(LabError):
    """The kernel or the privileges refuse a capability a collector needs."""


class CollectorError(LabError):
    """A collector failed in a way that must stop the run (``--packets required``)."""


class ClientError(LabError):
    """The client binary is missing, not executable or could not be built."""


class SchemaError(LabError):
    """A file the lab wrote does not match its JSON Schema (a bug in the lab)."""

    exit_code = 3


class ArchiveError(LabError):
    """An evidence archive is unreadable, unsafe or has been tampered with."""

    exit_code = 1


class SigningError(LabError):
    """A key is missing, malformed, has unsafe permissions, or a signature is wrong."""


class ContainerError(LabError):
    """The Docker engine, the image build or the container run failed."""


class Interrupted(LabError):
    """The user interrupted the run (Ctrl-C); everything started was stopped."""

    exit_code = 130


class SandboxError(LabError):
    """The invocation sandbox (user, cgroup, network namespace, bwrap, setpriv) cannot be
    set up; the message names the missing capability and what to do."""


class CampaignError(LabError):
    """A campaign cannot start: its task file, its agent command, or a baseline that does
    not show what the task requires; the message names which and what to do."""


class TaskError(CampaignError):
    """A fixture task (``campaigns/*/task.yaml``) cannot be used: its file, its fixture, a
    baseline that does not fail as required, or a contract whose calibration failed."""


class WorkloadError(LabError):
    """A workload cannot judge what it was given (a candidate tree that is not a Go module,
    a fixture that is missing); the message names which and what to do."""
