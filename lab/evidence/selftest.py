"""Show that tampering is caught: tamper with temporary copies of an archive and record
whether verification rejects each one (``python -m lab verify --selftest``).

    for case in selftest(Path("artifacts/r1.tar.gz"), Path("lab.pub")):
        print(case.name, case.expected, case.outcome, case.reason)

The untouched copy must be accepted; a flipped bit, a deleted or added member, a rewritten
SHA256SUMS, a re-signed archive and a truncated file must be rejected (a re-signed one is
accepted without ``--pubkey``: the embedded key proves integrity, not authenticity).
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lab.errors import ArchiveError, LabError
from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIG,
    CHECKSUMS_SIGNIFY,
    NOT_SUBJECTS,
    PROVENANCE,
    PUBKEY,
    PUBKEY_PEM,
    UNLISTED,
    render_checksums,
    render_gnu_checksums,
)
from lab.evidence.provenance import envelope_line, sign_envelope
from lab.evidence.scan import metadata_name
from lab.evidence.signing import Signer
from lab.evidence.verify import verify_archive


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
    files = [e for e in entries if e.data is not None and metadata_name(e.info.name) is None]
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
        if e.data is not None and e.info.name.split("/", 1)[-1] not in UNLISTED | {CHECKSUMS_GNU}
    }
    gnu = _find(entries, CHECKSUMS_GNU)
    gnu.data = render_gnu_checksums(digests).encode()
    digests[CHECKSUMS_GNU] = hashlib.sha256(gnu.data).hexdigest()
    _find(entries, CHECKSUMS).data = render_checksums(digests).encode()


def _resign(entries: list[_Entry]) -> None:
    """What a forger holding only their own key would do: rewrite everything and sign it."""
    forger = Signer.ephemeral()
    _find(entries, PUBKEY).data = forger.public_key_file().encode()
    _find(entries, PUBKEY_PEM).data = forger.public_key.to_pem()
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
    _find(entries, CHECKSUMS_SIGNIFY).data = forger.sign_embedded(sums)


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
        report = verify_archive(path, pubkey=pubkey)
    except LabError as exc:  # a VerificationError's sentence is its first failure
        return "rejected", str(exc)
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


def require_expected(cases: list[SelftestCase], archive: str) -> None:
    """Raise :class:`ArchiveError` naming the first case that did not behave as expected."""
    bad = [case for case in cases if not case.ok]
    if not bad:
        return
    case = bad[0]
    if case.name == "untouched":
        raise ArchiveError(
            f"self-test of {archive}: the untouched archive does not verify: {case.reason}"
        )
    raise ArchiveError(
        f"self-test of {archive}: the '{case.name}' copy was {case.outcome}, not "
        f"{case.expected}ed; verification said: {case.reason}"
    )
