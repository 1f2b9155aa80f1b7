"""The checks of an evidence archive: structure, checksums, signatures, provenance. Each
appends a :class:`Check` (what was expected, what was found, and the one sentence naming the
member at fault) to a :class:`VerifyReport`; none raises for a bad archive.

    report = VerifyReport(archive="r1.tar.gz")
    files = structure_checks(report, scan, limits)    # run-relative name -> SHA-256
    key = signature_checks(report, scan, pubkey)       # first: a bad --pubkey raises
    listed = checksum_checks(report, scan, files)     # None when SHA256SUMS is unreadable
    other_form_checks(report, scan, key, listed)       # lab.evidence.forms
    provenance_checks(report, scan, key, files, listed)   # parsed only when vouched for
    report.ok, report.first_failure
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab.errors import ArchiveError, SigningError
from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_SIG,
    NOT_SUBJECTS,
    PROVENANCE,
    PUBKEY,
    UNLISTED,
    name_problem,
    parse_checksums,
)
from lab.evidence.keys import PublicKey
from lab.evidence.provenance import (
    BUILD_TYPE,
    EARLIER_BUILD_TYPES,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    invocation_id,
    loads_bounded,
    open_envelope,
)
from lab.evidence.scan import GiB, Limits, MiB, Scan
from lab.evidence.signing import verify_detached

INTEGRITY_ONLY_WARNING = (
    "No --pubkey was given: the archive was checked against its own lab.pub, which proves "
    "its files are intact and consistent, not who produced them."
)
EPHEMERAL_WARNING = (
    "The archive was signed with an ephemeral key generated for its run, so its authenticity "
    "is not established."
)


@dataclass(frozen=True)
class Check:
    """One verification step: what was expected, what was found, and, if it failed, why."""

    name: str
    passed: bool
    expected: str
    found: str
    #: one sentence naming the member/key at fault, set when the check failed
    message: str | None = None

    @property
    def status(self) -> Literal["PASS", "FAIL"]:
        return "PASS" if self.passed else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
        }


@dataclass
class VerifyReport:
    """Every check of one archive, in order, plus warnings a presenter must show."""

    archive: str
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    run_id: str | None = None
    key_id: str | None = None
    #: "--pubkey <file>" or "embedded lab.pub"
    key_source: str | None = None
    #: whether the (verified) signer declared its key ephemeral; None when unknown
    ephemeral: bool | None = None
    trusted_key: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def authenticity_established(self) -> bool:
        """Intact, signed by the key the user trusts, and that key is not ephemeral."""
        return self.ok and self.trusted_key and self.ephemeral is False

    @property
    def first_failure(self) -> Check | None:
        return next((c for c in self.checks if not c.passed), None)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else ArchiveError.exit_code

    def add(
        self, name: str, passed: bool, expected: str, found: str, message: str | None = None
    ) -> None:
        if not passed and message is None:
            message = f"{self.archive}: {name} failed (expected {expected}; found {found})."
        self.checks.append(Check(name, passed, expected, found, None if passed else message))

    def to_dict(self) -> dict[str, Any]:
        return {
            "archive": self.archive,
            "ok": self.ok,
            "run_id": self.run_id,
            "key_id": self.key_id,
            "key_source": self.key_source,
            "ephemeral": self.ephemeral,
            "authenticity_established": self.authenticity_established,
            "checks": [c.to_dict() for c in self.checks],
            "warnings": list(self.warnings),
        }


class VerificationError(ArchiveError):
    """An archive failed verification. ``str()`` is the first failure's sentence; ``report``
    holds every check, expected and found, for the CLI to print (like
    :class:`lab.host.procs.CommandFailed`, it lives beside the record it carries)."""

    def __init__(self, report: VerifyReport) -> None:
        failure = report.first_failure
        assert failure is not None, "only a failed report is an error"
        super().__init__(failure.message or f"{report.archive}: {failure.name} failed.")
        self.report = report


def _short(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _size(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def structure_checks(report: VerifyReport, scan: Scan, limits: Limits) -> dict[str, str]:
    """Types, names, limits; return run-relative file name -> digest."""
    bad_types = [
        f"{m.name} ({m.kind})" for m in scan.members if m.kind not in ("file", "directory")
    ]
    report.add(
        "member types",
        not bad_types,
        "regular files and directories only",
        _short(bad_types) if bad_types else f"{len(scan.members)} files and directories",
        f"{report.archive}: member {bad_types[0]} is not a regular file or directory; "
        "a lab archive holds nothing else."
        if bad_types
        else None,
    )

    problems: list[str] = []
    tops = {m.name.split("/", 1)[0] for m in scan.members if not m.name.startswith("/")}
    counts: dict[str, int] = {}
    for m in scan.members:
        counts[m.name] = counts.get(m.name, 0) + 1
    for m in scan.members:
        problem = name_problem(m.name)
        if problem is not None:
            problems.append(f"member {m.name[:80]!r} {problem}")
        elif counts.get(m.name, 0) > 1:  # one problem per name, however many copies
            problems.append(f"member {m.name!r} appears more than once ({counts[m.name]} times)")
            counts[m.name] = 0
    if len(tops) > 1:
        problems.append(f"members are under {len(tops)} top directories ({_short(sorted(tops))})")
    for m in scan.members:
        if "/" not in m.name and m.kind != "directory" and name_problem(m.name) is None:
            problems.append(f"member {m.name!r} is not under a top directory")
    report.run_id = next(iter(tops)) if len(tops) == 1 else None
    report.add(
        "member names",
        not problems,
        "unique relative paths under one top directory, without '..'",
        _short(problems) if problems else f"all under {report.run_id}/",
        f"{report.archive}: {problems[0]}; the archive is unsafe to unpack." if problems else None,
    )

    expected = (
        f"at most {limits.max_members} members, {_size(limits.max_member_size)} each, "
        f"{_size(limits.max_total_size)} in total"
    )
    found = f"{len(scan.members)} members, largest {_size(scan.largest)}, total {_size(scan.total)}"
    report.add(
        "size limits",
        scan.limit_error is None,
        expected,
        scan.limit_error or found,
        f"{report.archive}: {scan.limit_error}; refusing to read further (a size limit "
        "guards against archive bombs)."
        if scan.limit_error
        else None,
    )

    files: dict[str, str] = {}
    for m in scan.members:
        if m.kind == "file" and m.digest is not None and "/" in m.name:
            files.setdefault(m.name.split("/", 1)[1], m.digest)
    return files


def checksum_checks(
    report: VerifyReport, scan: Scan, files: dict[str, str]
) -> dict[str, str] | None:
    top = report.run_id or "<top>"
    raw = scan.metadata.get(CHECKSUMS)
    listed: dict[str, str] | None = None
    if raw is None:
        report.add(
            "SHA256SUMS",
            False,
            "a SHA256SUMS member",
            "missing",
            f"{report.archive}: {top}/SHA256SUMS is missing, so no member can be checked.",
        )
    else:
        try:
            listed = parse_checksums(raw.decode("utf-8"), what=f"{top}/{CHECKSUMS}")
        except (ArchiveError, UnicodeDecodeError) as exc:
            why = str(exc) if isinstance(exc, ArchiveError) else f"{top}/SHA256SUMS is not UTF-8."
            why = f"{report.archive}: {why}"
            report.add("SHA256SUMS", False, "sha256sum --tag lines", "unparseable", why)
        else:
            report.add("SHA256SUMS", True, "sha256sum --tag lines", f"{len(listed)} entries")
    if listed is None:
        return None

    present = {name for name in files if name not in UNLISTED}
    ordered = sorted(listed)
    missing = sorted(set(listed) - present)
    extra = sorted(present - set(listed))
    for excluded in sorted(UNLISTED):
        if excluded in listed:
            extra.append(f"{excluded} (listed in SHA256SUMS)")
    stray_dirs = [
        m.name
        for m in scan.members
        if m.kind == "directory" and "/" in m.name and not _holds_listed(ordered, m.name)
    ]
    found_parts = []
    if missing:
        found_parts.append(f"missing: {_short(missing)}")
    if extra:
        found_parts.append(f"not listed: {_short(extra)}")
    if stray_dirs:
        found_parts.append(f"unlisted directories: {_short(stray_dirs)}")
    message: str | None
    if missing:
        message = f"{report.archive}: {top}/{missing[0]} is listed in SHA256SUMS but missing."
    elif extra:
        message = f"{report.archive}: {top}/{extra[0]} is in the archive but not in SHA256SUMS."
    elif stray_dirs:
        message = f"{report.archive}: directory {stray_dirs[0]} holds no listed file."
    else:
        message = None
    report.add(
        "member set",
        message is None,
        f"exactly the {len(listed)} files in SHA256SUMS, plus SHA256SUMS and its signatures",
        "; ".join(found_parts) if found_parts else f"{len(present)} files, as listed",
        message,
    )

    mismatched = [n for n in sorted(listed) if n in files and files[n] != listed[n]]
    first = mismatched[0] if mismatched else None
    report.add(
        "member digests",
        not mismatched,
        "every member's SHA-256 equals its SHA256SUMS line",
        f"{len(mismatched)} differ: {_short(mismatched)}"
        if mismatched
        else f"{len(listed) - len(missing)} match",
        f"{report.archive}: {top}/{first} does not match SHA256SUMS (expected "
        f"{_distinct(listed[first], files[first])}): the member was changed."
        if first
        else None,
    )
    return listed


def _distinct(expected: str, found: str) -> str:
    """``expected <prefix>…, found <prefix>…``, each prefix long enough to show where the two
    digests differ (16 digits at least)."""
    differ = next((i for i, (a, b) in enumerate(zip(expected, found, strict=False)) if a != b), 0)
    n = max(16, differ + 1)
    cut = "…" if n < max(len(expected), len(found)) else ""
    return f"{expected[:n]}{cut}, found {found[:n]}{cut}"


def _holds_listed(ordered: list[str], member: str) -> bool:
    """Whether directory ``member`` (``<top>/<path>``) holds a file of the sorted list:
    a binary search for its prefix, never a set of every listed name's parents (which is
    quadratic in a path's depth)."""
    prefix = member.split("/", 1)[1] + "/"
    i = bisect.bisect_left(ordered, prefix)
    return i < len(ordered) and ordered[i].startswith(prefix)


def signature_checks(report: VerifyReport, scan: Scan, pubkey: Path | None) -> PublicKey | None:
    top = report.run_id or "<top>"
    embedded: PublicKey | None = None
    embedded_error: str | None = None
    if PUBKEY in scan.metadata:
        try:
            embedded = PublicKey.parse(scan.metadata[PUBKEY], what=f"{top}/{PUBKEY}")
        except SigningError as exc:
            embedded_error = str(exc)
    else:
        embedded_error = f"{top}/{PUBKEY} is missing"

    key: PublicKey | None
    if pubkey is not None:
        given = PublicKey.load(pubkey)  # a bad --pubkey is the user's error: it raises
        key = given
        report.key_source = f"--pubkey {pubkey.name}"
        report.trusted_key = True
        same = embedded is not None and embedded.raw == given.raw
        report.add(
            "embedded public key",
            same,
            f"{PUBKEY} is the given key {given.key_id}",
            embedded.key_id if embedded else (embedded_error or "missing"),
            None
            if same
            else f"{report.archive}: {top}/{PUBKEY} is not the public key given with --pubkey "
            f"({given.key_id}); the archive was signed by someone else.",
        )
    else:
        key = embedded
        report.key_source = f"embedded {PUBKEY}"
        report.warnings.append(INTEGRITY_ONLY_WARNING)
        if key is None:
            report.add(
                "public key",
                False,
                f"an Ed25519 public key in {PUBKEY}",
                embedded_error or "missing",
                f"{report.archive}: {embedded_error}; pass the signer's key with --pubkey.",
            )
            return None
    assert key is not None
    report.key_id = key.key_id

    sig_text = scan.metadata.get(CHECKSUMS_SIG)
    expected = f"Ed25519 signature of SHA256SUMS by key {key.key_id} ({report.key_source})"
    if sig_text is None or CHECKSUMS not in scan.metadata:
        absent = CHECKSUMS_SIG if sig_text is None else CHECKSUMS
        report.add(
            "SHA256SUMS signature",
            False,
            expected,
            f"{absent} missing",
            f"{report.archive}: {top}/{absent} is missing, so the archive is not signed.",
        )
        return key
    try:
        parsed = verify_detached(
            scan.metadata[CHECKSUMS],
            sig_text.decode("ascii", "replace"),
            key,
            what=f"{top}/{CHECKSUMS_SIG}",
        )
    except SigningError as exc:
        why = f"{report.archive}: {exc}"
        report.add("SHA256SUMS signature", False, expected, "does not verify", why)
    else:
        comment = parsed.trusted_comment
        if comment is not None and "key:ephemeral" in comment.split("\t"):
            report.ephemeral = True
        elif comment is not None and "key:persistent" in comment.split("\t"):
            report.ephemeral = False
        report.add(
            "SHA256SUMS signature",
            True,
            expected,
            "valid" + (f" (trusted comment: {comment})" if comment else ""),
        )
    return key


def _unvouched(report: VerifyReport, files: dict[str, str], listed: dict[str, str] | None) -> str:
    """Why the provenance may not be parsed yet, or "" when the signed SHA256SUMS vouches
    for it: its signature verified and it lists the provenance's digest."""
    signed = any(c.name == "SHA256SUMS signature" and c.passed for c in report.checks)
    if not signed:
        return "the signature over SHA256SUMS does not verify"
    if listed is None or listed.get(PROVENANCE) != files.get(PROVENANCE):
        return "its digest is not the one the signed SHA256SUMS lists"
    return ""


def provenance_checks(
    report: VerifyReport,
    scan: Scan,
    key: PublicKey | None,
    files: dict[str, str],
    listed: dict[str, str] | None,
) -> None:
    """The DSSE envelope, parsed only once the signed SHA256SUMS vouches for its bytes."""
    top = report.run_id or "<top>"
    raw = scan.metadata.get(PROVENANCE)
    expected = f"DSSE envelope signed by key {key.key_id if key else '?'}"
    if raw is None or key is None:
        why = f"{top}/{PROVENANCE} is missing" if raw is None else "no public key to check it"
        report.add("provenance signature", False, expected, why, f"{report.archive}: {why}.")
        return
    what = f"{top}/{PROVENANCE}"
    if reason := _unvouched(report, files, listed):
        why = f"{report.archive}: {what} was not parsed: {reason}; obtain the archive again."
        report.add("provenance signature", False, expected, f"not parsed: {reason}", why)
        return
    try:
        lines = raw.decode("utf-8").splitlines()
        if len(lines) != 1:
            raise SigningError(f"{what} must hold exactly one line (one envelope).")
        envelope = loads_bounded(lines[0].encode(), what=what)
        if not isinstance(envelope, dict):
            raise SigningError(f"{what} is not a JSON object.")
        statement = open_envelope(envelope, key, what=what)
    except (SigningError, UnicodeDecodeError) as exc:
        why = str(exc) if isinstance(exc, SigningError) else f"{what} is not UTF-8."
        why = f"{report.archive}: {why}"
        report.add("provenance signature", False, expected, "does not verify", why)
        return
    report.add("provenance signature", True, expected, "valid")
    run_id_check(report, statement)

    subjects: dict[str, str] = {}
    malformed = False
    entries = statement.get("subject") if isinstance(statement, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        digest = entry.get("digest", {}).get("sha256") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(digest, str) or name in subjects:
            malformed = True
            continue
        subjects[name] = digest
    wanted = {n: d for n, d in files.items() if n not in NOT_SUBJECTS}
    missing = sorted(set(wanted) - set(subjects))
    extra = sorted(set(subjects) - set(wanted))
    differ = sorted(n for n in set(wanted) & set(subjects) if wanted[n] != subjects[n])
    problems = (
        ([f"missing: {_short(missing)}"] if missing else [])
        + ([f"not in archive: {_short(extra)}"] if extra else [])
        + ([f"digest differs: {_short(differ)}"] if differ else [])
        + (["malformed or duplicate subject entries"] if malformed or not entries else [])
    )
    message: str | None
    if missing:
        message = f"{report.archive}: {top}/{missing[0]} is not a subject of the provenance."
    elif extra:
        message = f"{report.archive}: provenance subject {extra[0]} is not in the archive."
    elif differ:
        message = f"{report.archive}: {top}/{differ[0]} does not match its provenance digest."
    elif problems:
        message = f"{report.archive}: {what} has malformed subject entries."
    else:
        message = None
    report.add(
        "provenance subjects",
        message is None,
        "every member except the provenance and the SHA256SUMS files, with equal SHA-256",
        "; ".join(problems) if problems else f"{len(subjects)} subjects match",
        message,
    )

    predicate = statement.get("predicate") if isinstance(statement, dict) else None
    build_def = predicate.get("buildDefinition") if isinstance(predicate, dict) else None
    build_type = build_def.get("buildType") if isinstance(build_def, dict) else None
    stype = statement.get("_type") if isinstance(statement, dict) else None
    ptype = statement.get("predicateType") if isinstance(statement, dict) else None
    known = build_type == BUILD_TYPE or build_type in EARLIER_BUILD_TYPES
    good = stype == STATEMENT_TYPE and ptype == PREDICATE_TYPE and known
    report.add(
        "provenance build type",
        good,
        f"{STATEMENT_TYPE}, {PREDICATE_TYPE}, buildType {BUILD_TYPE}",
        f"{stype}, {ptype}, buildType {build_type}",
        None
        if good
        else f"{report.archive}: the provenance's buildType is {build_type!r}, not the lab's "
        f"{BUILD_TYPE!r}.",
    )
    internal = build_def.get("internalParameters") if isinstance(build_def, dict) else None
    signing = internal.get("signing") if isinstance(internal, dict) else None
    if isinstance(signing, dict) and isinstance(signing.get("ephemeral"), bool):
        report.ephemeral = signing["ephemeral"]


def run_id_check(report: VerifyReport, statement: Any) -> None:
    """The top directory (the run id printed as the archive's) must be the run id the signed
    provenance names: a renamed archive is refused, and its run id never reported."""
    signed = invocation_id(statement)
    top = report.run_id
    bound = isinstance(signed, str) and signed == top
    report.add(
        "run id",
        bound,
        "the top directory is the run id the signed provenance names (invocationId)",
        f"{top}/ and {signed!r}" if not bound else f"{top}",
        None
        if bound
        else f"{report.archive}: the top directory {str(top)[:80]!r} is not the run id "
        f"{str(signed)[:80]!r} that the signed provenance names, so the archive was renamed; "
        "verify the archive as its producer published it.",
    )
    if not bound:
        report.run_id = None
