"""``lab verify`` under hostile input (issue 12): each crafted archive used to exhaust memory,
take quadratic time, raise a traceback or be misreported. Each is now refused with one
sentence naming the member at fault, in bounded memory and time; the last test runs every
one through ``python -m lab verify`` under a 256 MiB address-space limit.
"""

from __future__ import annotations

import base64
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lab.errors import ArchiveError, SigningError
from lab.evidence.archive import MAX_PATH_DEPTH, name_problem, parse_checksums
from lab.evidence.checks import _distinct
from lab.evidence.keys import generate_keypair
from lab.evidence.provenance import json_depth_problem, open_envelope, pae, sign_envelope
from lab.evidence.signing import Signer
from lab.evidence.verify import inspect_archive
from tests.conftest import ROOT
from tests.unit.evidence import hostile_archives as crafted
from tests.unit.evidence.test_verify import assert_rejected, make_archive

MEMORY = 256 << 20
#: the bound that tells a linear scan from a quadratic one, not a benchmark: the 99,001-member
#: archive takes 10-11 s to refuse on this 2-core machine today (the same at 3a315fb), while a
#: scan that compared every member with every other would take hours
SECONDS = 30.0


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every crafted archive, built once, plus the trusted key as ``"pubkey"``."""
    root = tmp_path_factory.mktemp("hostile")
    keys = generate_keypair(root / "keys")
    good = make_archive(root, Signer.from_file(keys.secret)).path
    attacker = Signer.ephemeral()
    return {
        "pubkey": keys.public,
        "gnu-long-name": crafted.gnu_long_name(root / "gnu-long-name.tar.gz"),
        "pax-header": crafted.pax_header(root / "pax-header.tar.gz"),
        "deep-paths": crafted.deep_paths(good, root / "deep-paths.tar.gz", attacker),
        "deep-provenance": crafted.deep_provenance(good, root / "deep-prov.tar.gz"),
        "deep-provenance-resigned": crafted.deep_provenance(
            good, root / "deep-prov-resigned.tar.gz", attacker
        ),
        "duplicates": crafted.duplicates(good, root / "duplicates.tar.gz"),
        "renamed-top": crafted.renamed_top(good, root / "renamed-top.tar.gz"),
        "flipped-sums": crafted.flipped_in_sums(good, root / "flipped-sums.tar.gz"),
    }


def timed(call: Callable[[], str]) -> str:
    start = time.monotonic()
    message = call()
    assert time.monotonic() - start < SECONDS, message
    return message


@pytest.mark.parametrize("case", ["gnu-long-name", "pax-header"])
def test_huge_extended_header_is_refused_from_its_header(built: dict[str, Path], case: str) -> None:
    """A 1 GiB long name or PAX record is refused from the header that declares it."""
    message = timed(lambda: assert_rejected(built[case], built["pubkey"], "extended header"))
    assert "1073741824 bytes" in message and len(message) < 400


@pytest.mark.parametrize("pubkey", [True, False])
def test_deep_paths_in_sha256sums(built: dict[str, Path], pubkey: bool) -> None:
    """Four listed paths 40,000 directories deep: refused by the line's length, quickly."""
    key = built["pubkey"] if pubkey else None
    needle = "signed by someone else" if pubkey else "SHA256SUMS"
    message = timed(lambda: assert_rejected(built["deep-paths"], key, needle))
    assert len(message) < 400


def test_deep_paths_are_bounded_even_when_signed(built: dict[str, Path]) -> None:
    """Without --pubkey the attacker's own signature holds: the path bound itself refuses."""
    report = inspect_archive(built["deep-paths"], pubkey=None)
    check = next(c for c in report.checks if c.name == "SHA256SUMS")
    assert not check.passed and "characters long" in (check.message or ""), check


def test_listed_path_depth_is_bounded() -> None:
    deep = "d/" * (MAX_PATH_DEPTH + 1) + "f"
    with pytest.raises(ArchiveError, match="levels deep"):
        parse_checksums(f"SHA256 ({deep}) = {'0' * 64}\n")
    assert name_problem("d/" * MAX_PATH_DEPTH + "f") is None


@pytest.mark.parametrize("case", ["deep-provenance", "deep-provenance-resigned"])
@pytest.mark.parametrize("pubkey", [True, False])
def test_deeply_nested_provenance(built: dict[str, Path], case: str, pubkey: bool) -> None:
    """200,000 nested '[' in provenance.intoto.jsonl: one sentence, no RecursionError."""
    key = built["pubkey"] if pubkey else None
    message = timed(lambda: assert_rejected(built[case], key))
    assert "Recursion" not in message


def test_deeply_nested_provenance_is_not_parsed_unsigned(built: dict[str, Path]) -> None:
    """The list's signature and the provenance's listed digest come before any JSON."""
    report = inspect_archive(built["deep-provenance"], pubkey=built["pubkey"])
    failure = report.first_failure
    assert failure is not None and "provenance.intoto.jsonl" in (failure.message or "")
    prov = next(c for c in report.checks if c.name == "provenance signature")
    assert "not parsed" in prov.found, prov
    names = [c.name for c in report.checks]
    assert names.index("SHA256SUMS signature") < names.index("SHA256SUMS")


def test_deeply_nested_provenance_signed_by_the_attacker(built: dict[str, Path]) -> None:
    """A list re-signed with the attacker's own key vouches for the provenance: the JSON depth
    bound refuses it."""
    report = inspect_archive(built["deep-provenance-resigned"], pubkey=None)
    prov = next(c for c in report.checks if c.name == "provenance signature")
    assert not prov.passed and "nested more than 64 levels" in (prov.message or ""), prov


def test_deep_signed_payload_is_bounded() -> None:
    """The DSSE payload (signed by whoever holds the key) is depth-checked too."""
    signer = Signer.ephemeral()
    envelope = sign_envelope({"x": 1}, signer)
    envelope["payload"] = base64.b64encode(b"[" * 100_000).decode()
    envelope["signatures"][0]["sig"] = base64.b64encode(
        signer.sign(pae(envelope["payloadType"], b"[" * 100_000))
    ).decode()
    with pytest.raises(SigningError, match="nested more than 64 levels"):
        open_envelope(envelope, signer.public_key, what="p")
    assert json_depth_problem(b'{"a": "[[[[[[[[", "b": [[1]]}', max_depth=3) is None


def test_duplicate_members_linear_and_one_sentence(built: dict[str, Path]) -> None:
    """99,000 copies of lab.pub after the genuine one: one problem, in linear time."""
    message = timed(
        lambda: assert_rejected(built["duplicates"], built["pubkey"], "lab.pub", "more than once")
    )
    assert "99001 times" in message and len(message) < 400


@pytest.mark.parametrize("pubkey", [True, False])
def test_renamed_top_directory_is_refused(built: dict[str, Path], pubkey: bool) -> None:
    """run-1/ renamed run-forged/: the run id is bound to the signed provenance."""
    key = built["pubkey"] if pubkey else None
    message = assert_rejected(built["renamed-top"], key, "'run-forged'", "'run-1'", "run id")
    report = inspect_archive(built["renamed-top"], pubkey=key)
    assert report.run_id is None, "an unbound run id is never reported as the run's"
    assert not report.authenticity_established
    assert "renamed" in message


def test_flipped_byte_in_sha256sums_is_blamed_on_it(built: dict[str, Path]) -> None:
    """A digit flipped in results.json's SHA256SUMS line, past the 16th: SHA256SUMS (its
    signature) is blamed, not results.json, and the digests shown differ."""
    message = assert_rejected(built["flipped-sums"], built["pubkey"], "SHA256SUMS.sig")
    assert "results.json" not in message
    report = inspect_archive(built["flipped-sums"], pubkey=built["pubkey"])
    digests = next(c for c in report.checks if c.name == "member digests")
    shown = (digests.message or "").split("(expected ")[1].split("):")[0]
    expected, found = shown.split(", found ")
    assert expected != found and len(expected.rstrip("…")) == 41, digests.message


def test_distinct_digest_prefixes() -> None:
    a, b = "ab" * 32, "ab" * 20 + "ff" + "ab" * 11
    assert _distinct(a, b) == f"{a[:41]}…, found {b[:41]}…"
    assert _distinct("0" * 64, "1" + "0" * 63) == f"{'0' * 16}…, found 1{'0' * 15}…"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


@pytest.mark.parametrize(
    "case",
    [
        "gnu-long-name",
        "pax-header",
        "deep-paths",
        "deep-provenance",
        "deep-provenance-resigned",
        "duplicates",
        "renamed-top",
        "flipped-sums",
    ],
)
def test_verify_cli_under_memory_limit(built: dict[str, Path], case: str) -> None:
    """``python -m lab verify`` in 256 MiB of address space, within SECONDS: exit 1, one
    sentence on stderr naming the archive, no traceback."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "lab", "verify", str(built[case]), "--pubkey", str(built["pubkey"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
        check=False,
    )
    elapsed = time.monotonic() - start
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    last = proc.stderr.strip().splitlines()[-1]
    assert built[case].name in last and last.endswith("."), last
    assert elapsed < SECONDS, elapsed
