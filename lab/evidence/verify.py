"""Verify an evidence archive without extracting it, and show that tampering is caught.

The archive is read once, as a stream, with every header checked *before* its data is read
(types, names, sizes), so a hostile archive can neither write to disk nor exhaust memory.
Each check is recorded with what was expected and what was found; the strict API raises the
first failure as one sentence.

    report = verify_archive(Path("artifacts/r1.tar.gz"), pubkey=Path("lab.pub"))
    for check in report.checks:
        print(check.status, check.name, check.expected, check.found)
    verify_archive_or_raise(path, pubkey)         # ArchiveError on the first failure
    for case in selftest(path, pubkey):            # tampered copies must be rejected
        print(case.name, case.outcome, case.reason)
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from lab.errors import ArchiveError, LabError, SigningError
from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_SIG,
    NOT_SUBJECTS,
    PROVENANCE,
    PUBKEY,
    name_problem,
    parse_checksums,
    render_checksums,
)
from lab.evidence.keys import PublicKey
from lab.evidence.provenance import (
    BUILD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    envelope_line,
    open_envelope,
    sign_envelope,
)
from lab.evidence.signing import Signer, verify_detached

MiB = 1 << 20
GiB = 1 << 30
_CHUNK = MiB
#: members whose content verification needs in memory
_METADATA = (CHECKSUMS, CHECKSUMS_SIG, PUBKEY, PROVENANCE)

INTEGRITY_ONLY_WARNING = (
    "No --pubkey was given: the archive was checked against its own lab.pub, which proves "
    "its files are intact and consistent, not who produced them."
)
EPHEMERAL_WARNING = (
    "The archive was signed with an ephemeral key generated for its run, so its authenticity "
    "is not established."
)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Guards against archive bombs; every limit is checked from headers before reading."""

    max_members: int = 100_000
    max_member_size: int = 512 * MiB
    max_total_size: int = 2 * GiB
    #: SHA256SUMS, its signature, lab.pub and the provenance are read into memory
    max_metadata_size: int = 64 * MiB
    #: tar headers, PAX records and end padding allowed beyond the member data: the whole
    #: decompressed stream is capped at ``max_total_size + max_header_bytes``
    max_header_bytes: int = 64 * MiB


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


# --- reading -------------------------------------------------------------------------------
class _CappedReader:
    """Counts decompressed bytes and stops at ``cap``: a gzip bomb cannot run unbounded."""

    def __init__(self, inner: gzip.GzipFile, cap: int) -> None:
        self.inner = inner
        self.cap = cap
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = _CHUNK
        data = self.inner.read(size)
        self.count += len(data)
        if self.count > self.cap:
            raise _Bomb(f"more than {self.cap} bytes of uncompressed data")
        return data


class _Bomb(Exception):
    pass


@dataclass
class _Member:
    name: str
    kind: str
    size: int
    digest: str | None = None


@dataclass
class _Scan:
    members: list[_Member] = field(default_factory=list)
    metadata: dict[str, bytes] = field(default_factory=dict)
    read_error: str | None = None
    limit_error: str | None = None
    largest: int = 0
    total: int = 0


_KIND = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.DIRTYPE: "directory",
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "FIFO",
    tarfile.CONTTYPE: "contiguous file",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}


def _metadata_name(name: str) -> str | None:
    parts = name.split("/", 1)
    if len(parts) == 2 and parts[1] in _METADATA:
        return parts[1]
    return None


def _describe_read_error(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the compressed stream ends early: the archive was cut short"
    if isinstance(exc, gzip.BadGzipFile):
        return f"it is not gzip data ({exc})"
    if isinstance(exc, zlib.error):
        return f"the compressed data is corrupt ({exc})"
    if isinstance(exc, tarfile.TarError):
        text = str(exc) or type(exc).__name__
        if "unexpected end" in text:
            return "the tar stream ends early: the archive was cut short"
        return f"the tar data is corrupt ({text})"
    return f"{type(exc).__name__}: {exc}"


def _scan(path: Path, limits: Limits) -> _Scan:
    scan = _Scan()
    if not path.is_file():
        scan.read_error = "the file does not exist" if not path.exists() else "not a file"
        return scan
    if path.stat().st_size == 0:
        scan.read_error = "the file is empty"
        return scan
    cap = limits.max_total_size + limits.max_header_bytes
    try:
        with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            reader = _CappedReader(gz, cap)
            with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
                for info in tar:
                    if not _scan_member(tar, info, scan, limits):
                        return scan
            # The rest of the stream must be tar padding; reading it to the end also makes
            # gzip check its CRC and length, which catches a cut inside the padding.
            while chunk := reader.read(_CHUNK):
                if chunk.strip(b"\0"):
                    scan.read_error = "there is data after the end of the tar archive"
                    return scan
    except _Bomb as exc:
        scan.limit_error = f"the archive expands to {exc}"
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        scan.read_error = _describe_read_error(exc)
    return scan


def _scan_member(tar: tarfile.TarFile, info: tarfile.TarInfo, scan: _Scan, limits: Limits) -> bool:
    """Record one member; False stops the scan (a limit was exceeded)."""
    if len(scan.members) >= limits.max_members:
        scan.limit_error = f"more than {limits.max_members} members"
        return False
    kind = _KIND.get(info.type, f"tar type {info.type!r}")
    member = _Member(info.name, kind, info.size)
    scan.members.append(member)
    if kind != "file":
        return True
    if info.size > limits.max_member_size:
        scan.limit_error = (
            f"{info.name} declares {info.size} bytes (limit {limits.max_member_size})"
        )
        return False
    scan.total += info.size
    scan.largest = max(scan.largest, info.size)
    if scan.total > limits.max_total_size:
        scan.limit_error = f"members total more than {limits.max_total_size} bytes"
        return False
    keep = _metadata_name(info.name)
    if keep is not None and info.size > limits.max_metadata_size:
        scan.limit_error = f"{info.name} is larger than {limits.max_metadata_size} bytes"
        return False
    data = tar.extractfile(info)
    if data is None:  # pragma: no cover - regular files always have data
        return True
    digest = hashlib.sha256()
    kept: list[bytes] = []
    while chunk := data.read(_CHUNK):
        digest.update(chunk)
        if keep is not None:
            kept.append(chunk)
    member.digest = digest.hexdigest()
    if keep is not None and not any(m.name == info.name for m in scan.members[:-1]):
        scan.metadata[keep] = b"".join(kept)
    return True


# --- checks --------------------------------------------------------------------------------
def _short(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _size(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def _structure_checks(report: VerifyReport, scan: _Scan, limits: Limits) -> dict[str, str]:
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
    seen: set[str] = set()
    for m in scan.members:
        problem = name_problem(m.name)
        if problem is not None:
            problems.append(f"member {m.name!r} {problem}")
        elif m.name in seen:
            problems.append(f"member {m.name!r} appears more than once")
        seen.add(m.name)
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


def _checksum_checks(
    report: VerifyReport, scan: _Scan, files: dict[str, str]
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

    present = {name for name in files if name not in (CHECKSUMS, CHECKSUMS_SIG)}
    missing = sorted(set(listed) - present)
    extra = sorted(present - set(listed))
    for excluded in (CHECKSUMS, CHECKSUMS_SIG):
        if excluded in listed:
            extra.append(f"{excluded} (listed in SHA256SUMS)")
    parents = {str(p) for name in listed for p in PurePosixPath(name).parents}
    stray_dirs = [
        m.name
        for m in scan.members
        if m.kind == "directory" and "/" in m.name and m.name.split("/", 1)[1] not in parents
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
        f"exactly the {len(listed)} files in SHA256SUMS, plus SHA256SUMS and its signature",
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
        f"{listed[first][:16]}…, found {files[first][:16]}…): the member was changed."
        if first
        else None,
    )
    return listed


def _signature_checks(report: VerifyReport, scan: _Scan, pubkey: Path | None) -> PublicKey | None:
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


def _provenance_checks(
    report: VerifyReport, scan: _Scan, key: PublicKey | None, files: dict[str, str]
) -> None:
    top = report.run_id or "<top>"
    raw = scan.metadata.get(PROVENANCE)
    expected = f"DSSE envelope signed by key {key.key_id if key else '?'}"
    if raw is None or key is None:
        why = f"{top}/{PROVENANCE} is missing" if raw is None else "no public key to check it"
        report.add("provenance signature", False, expected, why, f"{report.archive}: {why}.")
        return
    what = f"{top}/{PROVENANCE}"
    try:
        lines = raw.decode("utf-8").splitlines()
        if len(lines) != 1:
            raise SigningError(f"{what} must hold exactly one line (one envelope).")
        envelope = json.loads(lines[0])
        if not isinstance(envelope, dict):
            raise SigningError(f"{what} is not a JSON object.")
        statement = open_envelope(envelope, key, what=what)
    except (SigningError, ValueError, UnicodeDecodeError) as exc:
        why = str(exc) if isinstance(exc, SigningError) else f"{what} is not valid JSON."
        why = f"{report.archive}: {why}"
        report.add("provenance signature", False, expected, "does not verify", why)
        return
    report.add("provenance signature", True, expected, "valid")

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
        "every member except the provenance and SHA256SUMS(.sig), with equal SHA-256",
        "; ".join(problems) if problems else f"{len(subjects)} subjects match",
        message,
    )

    predicate = statement.get("predicate") if isinstance(statement, dict) else None
    build_def = predicate.get("buildDefinition") if isinstance(predicate, dict) else None
    build_type = build_def.get("buildType") if isinstance(build_def, dict) else None
    stype = statement.get("_type") if isinstance(statement, dict) else None
    ptype = statement.get("predicateType") if isinstance(statement, dict) else None
    good = stype == STATEMENT_TYPE and ptype == PREDICATE_TYPE and build_type == BUILD_TYPE
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


def verify_archive(
    path: Path, pubkey: Path | None = None, *, limits: Limits | None = None
) -> VerifyReport:
    """Run every check and collect the results; never raises for a bad archive.

    A ``pubkey`` that cannot be read raises :class:`SigningError` (the user's input, not the
    archive, is at fault).
    """
    limits = limits or Limits()
    report = VerifyReport(archive=path.name)
    scan = _scan(path, limits)
    if scan.read_error is not None:
        report.add(
            "archive readable",
            False,
            "a complete gzip-compressed tar archive",
            scan.read_error,
            f"{path.name} cannot be read as a gzip-compressed tar archive: {scan.read_error}.",
        )
        return report
    report.add(
        "archive readable",
        True,
        "a complete gzip-compressed tar archive",
        f"{len(scan.members)} members",
    )
    files = _structure_checks(report, scan, limits)
    if scan.limit_error is not None:
        return report  # the scan stopped early; the remaining checks would mislead
    _checksum_checks(report, scan, files)
    key = _signature_checks(report, scan, pubkey)
    _provenance_checks(report, scan, key, files)
    if report.ephemeral:
        report.warnings.append(EPHEMERAL_WARNING)
    return report


def verify_archive_or_raise(
    path: Path, pubkey: Path | None = None, *, limits: Limits | None = None
) -> VerifyReport:
    """Like :func:`verify_archive`, but raise :class:`ArchiveError` on the first failure."""
    report = verify_archive(path, pubkey, limits=limits)
    failure = report.first_failure
    if failure is not None:
        raise ArchiveError(failure.message or f"{path.name}: {failure.name} failed.")
    return report


# --- self-test -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SelftestCase:
    name: str
    #: what was done to the copy, in one sentence
    tampering: str
    expected: Literal["reject", "accept"]
    outcome: Literal["rejected", "accepted"]
    #: the sentence verification gave (its first failure, or its warning when accepted)
    reason: str

    @property
    def ok(self) -> bool:
        return (self.expected == "reject") == (self.outcome == "rejected")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tampering": self.tampering,
            "expected": self.expected,
            "outcome": self.outcome,
            "reason": self.reason,
            "ok": self.ok,
        }


@dataclass
class _Entry:
    info: tarfile.TarInfo
    data: bytes | None


def _load_entries(path: Path) -> list[_Entry]:
    entries: list[_Entry] = []
    with tarfile.open(path, "r:gz") as tar:
        for info in tar.getmembers():
            data = None
            if info.isreg():
                fh = tar.extractfile(info)
                data = fh.read() if fh is not None else b""
            entries.append(_Entry(info, data))
    return entries


def _write_entries(entries: list[_Entry], dest: Path) -> None:
    with (
        open(dest, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for entry in entries:
            info = _copy_info(entry.info, size=len(entry.data or b""))
            tar.addfile(info, None if entry.data is None else io.BytesIO(entry.data))


def _copy_info(info: tarfile.TarInfo, **changes: Any) -> tarfile.TarInfo:
    copy = tarfile.TarInfo(info.name)
    for attr in ("type", "mode", "mtime", "uid", "gid", "uname", "gname", "linkname", "size"):
        setattr(copy, attr, getattr(info, attr))
    for attr, value in changes.items():
        setattr(copy, attr, value)
    return copy


def _find(entries: list[_Entry], rel: str) -> _Entry:
    for entry in entries:
        if entry.info.name.split("/", 1)[-1] == rel and entry.data is not None:
            return entry
    raise ArchiveError(f"the archive has no member {rel}; the self-test needs it.")


def _victim(entries: list[_Entry]) -> _Entry:
    """The first evidence file (not one of the signing files), preferring results.json."""
    files = [e for e in entries if e.data is not None and _metadata_name(e.info.name) is None]
    if not files:
        raise ArchiveError("the archive holds no evidence file to tamper with.")
    for entry in files:
        if entry.info.name.endswith("/results.json"):
            return entry
    return files[0]


def _flip(data: bytes) -> bytes:
    if not data:
        return b"\x01"
    index = len(data) // 2
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def _recompute_checksums(entries: list[_Entry]) -> None:
    digests = {
        e.info.name.split("/", 1)[1]: hashlib.sha256(e.data).hexdigest()
        for e in entries
        if e.data is not None and e.info.name.split("/", 1)[-1] not in (CHECKSUMS, CHECKSUMS_SIG)
    }
    _find(entries, CHECKSUMS).data = render_checksums(digests).encode()


def _resign(entries: list[_Entry]) -> None:
    """What a forger holding only their own key would do: rewrite everything and sign it."""
    forger = Signer.ephemeral()
    _find(entries, PUBKEY).data = forger.public_key_file().encode()
    prov = _find(entries, PROVENANCE)
    envelope = json.loads((prov.data or b"").decode())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    digests = {
        e.info.name.split("/", 1)[1]: hashlib.sha256(e.data).hexdigest()
        for e in entries
        if e.data is not None and e.info.name.split("/", 1)[-1] not in NOT_SUBJECTS
    }
    statement["subject"] = [{"name": n, "digest": {"sha256": digests[n]}} for n in sorted(digests)]
    prov.data = envelope_line(sign_envelope(statement, forger)).encode()
    _recompute_checksums(entries)
    sums = _find(entries, CHECKSUMS).data or b""
    _find(entries, CHECKSUMS_SIG).data = forger.sign_detached(sums, file_name=CHECKSUMS).encode()


def _case_flip(entries: list[_Entry]) -> str:
    victim = _victim(entries)
    victim.data = _flip(victim.data or b"")
    return f"flipped one bit in {victim.info.name}"


def _case_delete(entries: list[_Entry]) -> str:
    victim = _victim(entries)
    entries.remove(victim)
    return f"deleted {victim.info.name}"


def _case_add(entries: list[_Entry]) -> str:
    top = entries[0].info.name.split("/", 1)[0]
    info = _copy_info(_victim(entries).info, name=f"{top}/extra-evidence.txt")
    entries.append(_Entry(info, b"planted after signing\n"))
    return f"added {info.name}"


def _case_replace_sums(entries: list[_Entry]) -> str:
    victim = _victim(entries)
    victim.data = _flip(victim.data or b"")
    _recompute_checksums(entries)
    return f"changed {victim.info.name} and rewrote SHA256SUMS to match"


def _case_resign(entries: list[_Entry]) -> str:
    victim = _victim(entries)
    victim.data = _flip(victim.data or b"")
    _resign(entries)
    return f"changed {victim.info.name} and re-signed everything with another key"


_CASES: list[tuple[str, Callable[[list[_Entry]], str]]] = [
    ("flip-byte", _case_flip),
    ("delete-member", _case_delete),
    ("add-member", _case_add),
    ("replace-sha256sums", _case_replace_sums),
    ("resign-other-key", _case_resign),
]


def _outcome(path: Path, pubkey: Path | None) -> tuple[Literal["rejected", "accepted"], str]:
    try:
        report = verify_archive(path, pubkey)
    except LabError as exc:
        return "rejected", str(exc)
    failure = report.first_failure
    if failure is not None:
        return "rejected", failure.message or failure.name
    return "accepted", " ".join(report.warnings) or "all checks passed"


def selftest(archive: Path, pubkey: Path | None = None) -> list[SelftestCase]:
    """Tamper with temporary copies of ``archive`` and record whether verify rejects each.

    The untouched copy must be accepted. Without ``pubkey``, a copy re-signed with another
    key is *expected* to be accepted: the embedded key proves integrity, not authenticity.
    """
    cases: list[SelftestCase] = []
    with tempfile.TemporaryDirectory(prefix="lab-selftest-") as tmp:
        work = Path(tmp)
        copy = work / archive.name
        shutil.copyfile(archive, copy)
        outcome, reason = _outcome(copy, pubkey)
        cases.append(
            SelftestCase("untouched", "verified an unmodified copy", "accept", outcome, reason)
        )
        if outcome == "rejected":
            return cases
        original = _load_entries(copy)
        for name, tamper in _CASES:
            entries = [_Entry(_copy_info(e.info), e.data) for e in original]
            tampering = tamper(entries)
            target = work / f"{name}.tar.gz"
            _write_entries(entries, target)
            outcome, reason = _outcome(target, pubkey)
            expected: Literal["reject", "accept"] = (
                "accept" if name == "resign-other-key" and pubkey is None else "reject"
            )
            cases.append(SelftestCase(name, tampering, expected, outcome, reason))
        data = archive.read_bytes()
        truncated = work / "truncated.tar.gz"
        truncated.write_bytes(data[: len(data) // 2])
        outcome, reason = _outcome(truncated, pubkey)
        cases.append(
            SelftestCase(
                "truncated", f"cut the archive to {len(data) // 2} bytes", "reject", outcome, reason
            )
        )
    return cases


# --- console entry points (``python -m lab verify``) ------------------------------------------
# Drawing only: every figure comes from the report or the cases above.
def verify_main(archive: Path, pubkey: Path | None, console: Console) -> int:
    """Print every check as a table, then the warnings; raise the first failure."""
    report = verify_archive(archive, pubkey)
    table = Table(title=f"Verification of {archive.name}", title_justify="left")
    for column in ("check", "status", "expected", "found"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        colour = "green" if check.passed else "red"
        table.add_row(check.name, f"[{colour}]{check.status}[/]", check.expected, check.found)
    console.print(table)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    failure = report.first_failure
    if failure is not None:
        raise ArchiveError(failure.message or f"{archive.name}: {failure.name} failed.")
    verdict = (
        "authenticity established for that key"
        if report.authenticity_established
        else "integrity verified; authenticity not established"
    )
    console.print(
        f"[green]OK[/]: {archive.name}, run {report.run_id}, key {report.key_id} "
        f"({report.key_source}): {verdict}.",
        soft_wrap=True,
    )
    return 0


def selftest_main(archive: Path, pubkey: Path | None, console: Console) -> int:
    """Print each tampered copy and whether verification caught it; 0 when all behaved."""
    cases = selftest(archive, pubkey)
    table = Table(title=f"Self-test on copies of {archive.name}", title_justify="left")
    for column in ("case", "tampering", "expected", "outcome", "reason"):
        table.add_column(column, overflow="fold")
    for case in cases:
        colour = "green" if case.ok else "red"
        table.add_row(
            case.name, case.tampering, case.expected, f"[{colour}]{case.outcome}[/]", case.reason
        )
    console.print(table)
    bad = [case for case in cases if not case.ok]
    if bad:
        case = bad[0]
        if case.name == "untouched":
            raise ArchiveError(
                f"self-test of {archive.name}: the untouched archive does not verify: {case.reason}"
            )
        raise ArchiveError(
            f"self-test of {archive.name}: the '{case.name}' copy was {case.outcome}, not "
            f"{case.expected}ed; verification said: {case.reason}"
        )
    console.print(f"[green]OK[/]: all {len(cases)} cases behaved as expected.")
    return 0


__all__ = [
    "Check",
    "Limits",
    "SelftestCase",
    "VerifyReport",
    "selftest",
    "selftest_main",
    "verify_archive",
    "verify_archive_or_raise",
    "verify_main",
]
