"""The evidence archive: checksums, signatures, provenance and a deterministic tarball.

``write_archive`` adds seven files to a finished run directory and packs it::

    artifacts/<run-id>/lab.pub                   public key (signify format)
    artifacts/<run-id>/lab.pub.pem               the same key, SubjectPublicKeyInfo PEM
                                                 (``openssl pkeyutl -verify -pubin``)
    artifacts/<run-id>/provenance.intoto.jsonl   DSSE envelope: every file except it and the
                                                 SHA256SUMS files as subjects
    artifacts/<run-id>/SHA256SUMS.gnu            GNU `sha256sum` lines (`<hex>  <path>`, what
                                                 busybox reads): every file SHA256SUMS lists
                                                 except this one
    artifacts/<run-id>/SHA256SUMS                `sha256sum --tag` lines (what signify -C
                                                 reads): every file except itself and its two
                                                 signatures (so lab.pub, the provenance and
                                                 SHA256SUMS.gnu are covered)
    artifacts/<run-id>/SHA256SUMS.sig            signify/minisign signature of SHA256SUMS
    artifacts/<run-id>/SHA256SUMS.signify        signify's embedded form: the signature's
                                                 two lines, then the SHA256SUMS text
                                                 (``signify -C -p lab.pub -x SHA256SUMS.signify``)
    artifacts/<run-id>.tar.gz                    members under <run-id>/, byte-for-byte
                                                 reproducible from the same files
    artifacts/<run-id>.tar.gz.sha256             `sha256sum` line for publishing
    artifacts/<run-id>.tar.gz.sha256.sig         its signature (same format)

    signer = Signer.from_env()
    info = write_archive(run_dir, signer=signer, provenance_inputs=inputs, epoch=started)
    info.path, info.sha256

The tarball holds regular files and the directories above them only (an empty directory
carries no evidence and ``SHA256SUMS`` could not vouch for it), sorted, with mtime
``SOURCE_DATE_EPOCH`` (or the run's start), uid/gid 0, no owner names, modes 0644/0755,
PAX format, compressed as a few gzip members one after another (``lab.evidence.packing``:
most of them are compressed while the PDF is drawn), each with mtime 0 and no file name.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lab.errors import ArchiveError
from lab.evidence.keys import looks_like_private_key
from lab.evidence.packing import Packer
from lab.evidence.provenance import ProvenanceInputs, build_statement, envelope_line, sign_envelope
from lab.evidence.signing import Signer
from lab.host.digest import sha256_file

CHECKSUMS = "SHA256SUMS"
CHECKSUMS_SIG = "SHA256SUMS.sig"
#: the same digests as GNU ``sha256sum`` lines, for tools that reject the BSD-tagged form
#: (busybox); listed in SHA256SUMS, so the signatures cover it
CHECKSUMS_GNU = "SHA256SUMS.gnu"
#: signify's embedded signature: the two lines of CHECKSUMS_SIG followed by SHA256SUMS
CHECKSUMS_SIGNIFY = "SHA256SUMS.signify"
PUBKEY = "lab.pub"
PUBKEY_PEM = "lab.pub.pem"
PROVENANCE = "provenance.intoto.jsonl"
#: files write_archive generates; a run's own files may not use these names
GENERATED = (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIG,
    CHECKSUMS_SIGNIFY,
    PUBKEY,
    PUBKEY_PEM,
    PROVENANCE,
)
#: in the archive but not listed in SHA256SUMS: the list itself and its signatures, which
#: vouch for it (a list cannot hold its own digest)
UNLISTED = frozenset({CHECKSUMS, CHECKSUMS_SIG, CHECKSUMS_SIGNIFY})
#: not provenance subjects (the provenance cannot name itself, and the SHA256SUMS files are
#: written after it)
NOT_SUBJECTS = frozenset({PROVENANCE, CHECKSUMS_GNU, *UNLISTED})

#: private keys are small; files larger than this are not scanned for key material
KEY_SCAN_LIMIT = 64 * 1024
_CHECKSUM_LINE = re.compile(r"SHA256 \((?P<path>.+)\) = (?P<digest>[0-9a-f]{64})")
#: GNU ``sha256sum`` text mode: digest, two spaces, path (names never need escaping here:
#: ``name_problem`` refuses backslashes and control characters)
_GNU_LINE = re.compile(r"(?P<digest>[0-9a-f]{64})  (?P<path>.+)")
_UNSAFE_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")
#: a member path's length and directory depth: a lab run's are far below; a longer or
#: deeper name is refused before anything is built from it
MAX_PATH_LENGTH = 1024
MAX_PATH_DEPTH = 32
#: SHA256SUMS lines (a list cannot name more files than an archive may hold)
MAX_ENTRIES = 100_000


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a safe relative member path, or ``None`` when it is."""
    if not name:
        return "is empty"
    if len(name) > MAX_PATH_LENGTH:
        return f"is {len(name)} characters long (limit {MAX_PATH_LENGTH})"
    if name.count("/") > MAX_PATH_DEPTH:
        return f"is more than {MAX_PATH_DEPTH} levels deep"
    if name.startswith("/"):
        return "is an absolute path"
    if _UNSAFE_CHARS.search(name):
        return "contains a control character or a backslash"
    parts = name.split("/")
    if ".." in parts:
        return "contains a '..' component"
    if any(part in ("", ".") for part in parts):
        return "contains an empty or '.' component"
    return None


def archive_epoch(default: int, env: Mapping[str, str] | None = None) -> int:
    """``SOURCE_DATE_EPOCH`` when set (reproducible-builds.org), else ``default``."""
    value = (os.environ if env is None else env).get("SOURCE_DATE_EPOCH", "").strip()
    if not value:
        return int(default)
    if not value.isdigit():
        raise ArchiveError(
            f"SOURCE_DATE_EPOCH={value!r} is not a non-negative integer; unset it or set it "
            "to seconds since 1970-01-01."
        )
    return int(value)


def collect_files(run_dir: Path) -> list[str]:
    """Run-relative paths of every regular file, sorted; refuse anything else."""
    found: list[str] = []
    for root, dirs, files in os.walk(run_dir):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = Path(root) / name
            rel = path.relative_to(run_dir).as_posix()
            problem = name_problem(rel)
            if problem is not None:
                raise ArchiveError(f"{path}: the file name {problem}; rename it.")
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise ArchiveError(
                    f"{path} is a symbolic link; the archive holds regular files only, so "
                    "copy the target into the run directory instead."
                )
            if name in files:
                if not stat.S_ISREG(mode):
                    raise ArchiveError(
                        f"{path} is not a regular file (a device, socket or FIFO); remove it "
                        "from the run directory."
                    )
                found.append(rel)
    return sorted(found, key=lambda rel: PurePosixPath(rel).parts)


def refuse_private_keys(run_dir: Path, files: Iterable[str]) -> None:
    for rel in files:
        path = run_dir / rel
        if path.stat().st_size > KEY_SCAN_LIMIT:
            continue
        if looks_like_private_key(path.read_bytes()):
            raise ArchiveError(
                f"{path} holds a private key, and everything in a run directory is "
                "published; delete it and keep keys outside artifacts/."
            )


def render_checksums(digests: Mapping[str, str]) -> str:
    """``sha256sum --tag`` lines, sorted by path."""
    return "".join(f"SHA256 ({name}) = {digests[name]}\n" for name in sorted(digests))


def render_gnu_checksums(digests: Mapping[str, str]) -> str:
    """GNU ``sha256sum`` lines (``<hex>  <path>``), sorted by path."""
    return "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))


def parse_checksums(text: str, *, what: str = CHECKSUMS, gnu: bool = False) -> dict[str, str]:
    """Parse ``sha256sum --tag`` lines (GNU lines with ``gnu``) strictly; raise one sentence
    naming the bad line."""
    digests: dict[str, str] = {}
    if text and not text.endswith("\n"):
        raise ArchiveError(f"{what}: the last line has no line feed; the file was cut short.")
    lines = text.split("\n")[:-1]
    if len(lines) > MAX_ENTRIES:
        raise ArchiveError(
            f"{what} has {len(lines)} lines, more than the {MAX_ENTRIES} files an archive may "
            "hold; it was not written by the lab."
        )
    for number, line in enumerate(lines, start=1):
        if len(line) > MAX_PATH_LENGTH + 80:
            raise ArchiveError(
                f"{what}, line {number}: {line[:60]!r}… is {len(line)} characters long; a path "
                f"may have at most {MAX_PATH_LENGTH} (and be at most {MAX_PATH_DEPTH} levels "
                "deep)."
            )
        match = (_GNU_LINE if gnu else _CHECKSUM_LINE).fullmatch(line)
        if match is None:
            form = "'<64 hex digits>  path'" if gnu else "'SHA256 (path) = <64 hex digits>'"
            raise ArchiveError(f"{what}, line {number}: {line[:80]!r} is not of the form {form}.")
        name = match["path"]
        problem = name_problem(name)
        if problem is not None:
            raise ArchiveError(f"{what}, line {number}: the path {name[:80]!r} {problem}.")
        if name in digests:
            raise ArchiveError(f"{what}, line {number}: {name!r} is listed twice.")
        digests[name] = match["digest"]
    return digests


def build_tarball(
    run_dir: Path,
    dest: Path,
    *,
    epoch: int,
    files: list[str] | None = None,
    packer: Packer | None = None,
) -> str:
    """Pack ``run_dir`` as ``dest`` (members under ``<run_dir.name>/``); return its SHA-256.
    ``packer``: the run's :class:`~lab.evidence.packing.Packer`, whose prepared segments
    are used (the bytes are the same either way)."""
    files = collect_files(run_dir) if files is None else files
    if packer is None or packer.run_dir != run_dir or packer.epoch != epoch:
        packer = Packer(run_dir, epoch=epoch)
    return packer.build(dest, files)


def packer_for(run_dir: Path, epoch: int) -> Packer:
    """The packer ``write_archive(run_dir, epoch=epoch, ...)`` will pack with: prepare it
    (``packer.prepare(collect_files(run_dir))``) while something else finishes."""
    return Packer(run_dir, epoch=archive_epoch(epoch))


@dataclass(frozen=True)
class ArchiveInfo:
    """Where ``write_archive`` put things, and who signed them."""

    run_dir: Path
    path: Path
    sha256: str
    checksum_file: Path
    checksum_sig: Path
    files: int
    key_id: str
    ephemeral: bool


def write_archive(
    run_dir: Path,
    *,
    signer: Signer,
    provenance_inputs: ProvenanceInputs,
    epoch: int,
    packer: Packer | None = None,
) -> ArchiveInfo:
    """Sign a finished run directory and pack it as ``<run-id>.tar.gz`` beside it. ``epoch``
    is the run's start (seconds; ``SOURCE_DATE_EPOCH`` overrides it); ``packer``: from
    :func:`packer_for`, its segments prepared earlier."""
    if not run_dir.is_dir():
        raise ArchiveError(f"{run_dir} is not a directory; nothing to archive.")
    mtime = archive_epoch(epoch)
    for name in GENERATED:
        (run_dir / name).unlink(missing_ok=True)
    files = collect_files(run_dir)
    refuse_private_keys(run_dir, files)

    (run_dir / PUBKEY).write_text(signer.public_key_file(), encoding="ascii")
    (run_dir / PUBKEY_PEM).write_bytes(signer.public_key.to_pem())
    subjects = {rel: sha256_file(run_dir / rel) for rel in files}
    for name in (PUBKEY, PUBKEY_PEM):
        subjects[name] = sha256_file(run_dir / name)
    statement = build_statement(subjects, provenance_inputs, signer=signer)
    (run_dir / PROVENANCE).write_text(envelope_line(sign_envelope(statement, signer)), "utf-8")

    listed = dict(subjects)
    listed[PROVENANCE] = sha256_file(run_dir / PROVENANCE)
    (run_dir / CHECKSUMS_GNU).write_text(render_gnu_checksums(listed), "utf-8")
    listed[CHECKSUMS_GNU] = sha256_file(run_dir / CHECKSUMS_GNU)
    checksums = render_checksums(listed).encode("utf-8")
    (run_dir / CHECKSUMS).write_bytes(checksums)
    (run_dir / CHECKSUMS_SIG).write_text(
        signer.sign_detached(checksums, file_name=CHECKSUMS, public_key_name=PUBKEY), "ascii"
    )
    (run_dir / CHECKSUMS_SIGNIFY).write_bytes(
        signer.sign_embedded(checksums, public_key_name=PUBKEY)
    )

    tar_path = run_dir.parent / f"{run_dir.name}.tar.gz"
    sha = build_tarball(run_dir, tar_path, epoch=mtime, files=collect_files(run_dir), packer=packer)
    checksum_file = tar_path.with_name(tar_path.name + ".sha256")
    line = f"{sha}  {tar_path.name}\n".encode("ascii")
    checksum_file.write_bytes(line)
    checksum_sig = checksum_file.with_name(checksum_file.name + ".sig")
    checksum_sig.write_text(
        signer.sign_detached(line, file_name=checksum_file.name, public_key_name=PUBKEY), "ascii"
    )
    return ArchiveInfo(
        run_dir=run_dir,
        path=tar_path,
        sha256=sha,
        checksum_file=checksum_file,
        checksum_sig=checksum_sig,
        files=len(files) + len(GENERATED),
        key_id=signer.key_id,
        ephemeral=signer.is_ephemeral,
    )
