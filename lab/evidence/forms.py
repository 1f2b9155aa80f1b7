"""The other forms of the signed list and of the key, each checked against the form it
repeats: ``SHA256SUMS.signify`` (signify's embedded signature, what ``signify -C`` reads),
``SHA256SUMS.gnu`` (GNU ``sha256sum`` lines, what busybox reads) and ``lab.pub.pem`` (the
key as PEM, what openssl reads). A reviewer's tool that reads one form must see what the
others say.

    listed = checksum_checks(report, scan, files)
    key = signature_checks(report, scan, pubkey)
    other_form_checks(report, scan, key, listed)     # appends three checks, never raises
"""

from __future__ import annotations

from lab.errors import ArchiveError, SigningError
from lab.evidence.archive import (
    CHECKSUMS,
    CHECKSUMS_GNU,
    CHECKSUMS_SIGNIFY,
    PUBKEY,
    PUBKEY_PEM,
    parse_checksums,
)
from lab.evidence.checks import VerifyReport
from lab.evidence.keys import PublicKey
from lab.evidence.scan import Scan
from lab.evidence.signing import verify_embedded


def other_form_checks(
    report: VerifyReport, scan: Scan, key: PublicKey | None, listed: dict[str, str] | None
) -> None:
    """lab.pub.pem, SHA256SUMS.signify (when there is a key) and SHA256SUMS.gnu (when
    SHA256SUMS could be read)."""
    embedded: PublicKey | None = None
    embedded_error: str | None = None
    top = report.run_id or "<top>"
    try:
        if PUBKEY in scan.metadata:
            embedded = PublicKey.parse(scan.metadata[PUBKEY], what=f"{top}/{PUBKEY}")
    except SigningError as exc:
        embedded_error = str(exc).removesuffix(".")
    if listed is not None and PUBKEY_PEM not in listed and PUBKEY_PEM not in scan.metadata:
        report.add(PUBKEY_PEM, True, f"{PUBKEY_PEM} if SHA256SUMS lists it", EARLIER, None)
    else:
        pem_check(report, scan, embedded, embedded_error)
    if key is not None:
        embedded_check(
            report, scan, key, earlier=listed is not None and CHECKSUMS_GNU not in listed
        )
    if listed is not None:
        if CHECKSUMS_GNU not in listed and CHECKSUMS_GNU not in scan.metadata:
            report.add(
                CHECKSUMS_GNU, True, f"{CHECKSUMS_GNU} if SHA256SUMS lists it", EARLIER, None
            )
        else:
            gnu_list_check(report, scan, listed)


#: what a check of a form says when an archive of an earlier lab version never had it: the
#: signed SHA256SUMS does not list it (nor, for SHA256SUMS.signify, SHA256SUMS.gnu, written
#: with it), so nothing was removed; a listed one that is missing fails the checksums
EARLIER = "not in this archive, and not listed in the signed SHA256SUMS (an earlier lab version)"


def pem_check(
    report: VerifyReport, scan: Scan, embedded: PublicKey | None, embedded_error: str | None
) -> None:
    """lab.pub.pem (for openssl and cosign) holds the same Ed25519 key as lab.pub."""
    top = report.run_id or "<top>"
    what = f"{top}/{PUBKEY_PEM}"
    expected = f"{PUBKEY_PEM} is the key in {PUBKEY}"
    if embedded is not None:
        expected += f" ({embedded.key_id})"
    data = scan.metadata.get(PUBKEY_PEM)
    pem: PublicKey | None = None
    problem: str | None = None
    if data is None:
        problem = f"{what} is missing"
    else:
        try:
            pem = PublicKey.from_pem(data, what=what)
        except SigningError as exc:
            problem = str(exc).removesuffix(".")
    if problem is None and embedded is None:
        problem = f"{embedded_error or f'{top}/{PUBKEY} is missing'}, so {what} cannot be compared"
    if problem is None and pem is not None and embedded is not None and pem.raw != embedded.raw:
        problem = f"{what} holds key {pem.key_id}, not the key {embedded.key_id} in {top}/{PUBKEY}"
    report.add(
        PUBKEY_PEM,
        problem is None,
        expected,
        problem or f"the same Ed25519 key ({pem.key_id if pem else '?'})",
        None if problem is None else f"{report.archive}: {problem}.",
    )


def embedded_check(
    report: VerifyReport, scan: Scan, key: PublicKey, *, earlier: bool = False
) -> None:
    """SHA256SUMS.signify (what ``signify -C`` reads) is signed and embeds SHA256SUMS.
    ``earlier``: the signed list shows an archive of a lab that wrote no such file."""
    top = report.run_id or "<top>"
    what = f"{top}/{CHECKSUMS_SIGNIFY}"
    expected = f"signify embedded signature by key {key.key_id} of exactly SHA256SUMS"
    data = scan.metadata.get(CHECKSUMS_SIGNIFY)
    if data is None and earlier:
        report.add(CHECKSUMS_SIGNIFY, True, expected, EARLIER, None)
        return
    if data is None:
        why = f"{report.archive}: {what} is missing, so 'signify -C' cannot check the archive."
        report.add(CHECKSUMS_SIGNIFY, False, expected, "missing", why)
        return
    try:
        message = verify_embedded(data, key, what=what)
    except SigningError as exc:
        why = f"{report.archive}: {exc}"
        report.add(CHECKSUMS_SIGNIFY, False, expected, "does not verify", why)
        return
    same = message == scan.metadata.get(CHECKSUMS)
    report.add(
        CHECKSUMS_SIGNIFY,
        same,
        expected,
        "valid, embeds SHA256SUMS" if same else "valid, but embeds a different list",
        None
        if same
        else f"{report.archive}: {what} embeds a list that differs from {top}/{CHECKSUMS}.",
    )


def gnu_list_check(report: VerifyReport, scan: Scan, listed: dict[str, str]) -> None:
    """SHA256SUMS.gnu (for busybox's ``sha256sum -c``) says what SHA256SUMS says."""
    top = report.run_id or "<top>"
    what = f"{top}/{CHECKSUMS_GNU}"
    wanted = {n: d for n, d in listed.items() if n != CHECKSUMS_GNU}
    expected = f"GNU sha256sum lines for the {len(wanted)} other files SHA256SUMS lists"
    raw = scan.metadata.get(CHECKSUMS_GNU)
    problem: str | None = None
    gnu: dict[str, str] = {}
    if raw is None:
        problem = f"{what} is missing"
    else:
        try:
            gnu = parse_checksums(raw.decode("utf-8"), what=what, gnu=True)
        except (ArchiveError, UnicodeDecodeError) as exc:
            problem = str(exc).removesuffix(".") if isinstance(exc, ArchiveError) else None
            problem = problem or f"{what} is not UTF-8"
    if problem is None and gnu != wanted:
        differ = sorted(n for n in set(gnu) | set(wanted) if gnu.get(n) != wanted.get(n))
        problem = f"{what} disagrees with {top}/{CHECKSUMS} about {differ[0]}"
    report.add(
        CHECKSUMS_GNU,
        problem is None,
        expected,
        problem or f"{len(gnu)} entries, as in SHA256SUMS",
        None if problem is None else f"{report.archive}: {problem}.",
    )


#: results.json names the schema it matches in ``$schema``; the run ships that file
RESULTS = "results.json"
RESULTS_SCHEMA = "results.schema.json"


def results_schema_check(
    report: VerifyReport, files: dict[str, str], listed: dict[str, str] | None
) -> None:
    """A run's ``results.json`` comes with the ``results.schema.json`` it names in ``$schema``,
    listed in SHA256SUMS so the signature covers the schema as well as the results."""
    if RESULTS not in files:
        return  # not a run directory the lab wrote; the other checks say what it is
    top = report.run_id or "<top>"
    present = RESULTS_SCHEMA in files
    covered = present and listed is not None and RESULTS_SCHEMA in listed
    found = "listed in SHA256SUMS" if covered else "not listed" if present else "missing"
    report.add(
        "results schema",
        covered,
        f"{RESULTS_SCHEMA} beside {RESULTS}, listed in SHA256SUMS",
        found,
        None
        if covered
        else f"{report.archive}: {top}/{RESULTS_SCHEMA} (the schema results.json names) is "
        f"{'not listed in SHA256SUMS' if present else 'missing'}.",
    )
