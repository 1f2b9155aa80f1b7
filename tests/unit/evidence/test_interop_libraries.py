"""The provenance read by the libraries its formats come from, not by ours: securesystemslib
(the DSSE reference implementation's Python home) verifies the envelope with the key from
``lab.pub.pem``, and in-toto-attestation's ``Statement`` validates the payload (type, subjects
with digests, predicate type, predicate). Both are in the ``interop`` dependency group
(``pip install -e .[interop]``, installed by ``nox -s tests``); a missing one skips and names
itself unless ``LAB_REQUIRE_CAPABILITIES`` lists ``interop``."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from lab.evidence.archive import CHECKSUMS_GNU, PROVENANCE, PUBKEY_PEM
from lab.evidence.keys import generate_keypair
from lab.evidence.signing import Signer
from tests.conftest import ROOT, require
from tests.unit.evidence.test_archive import archive
from tests.unit.evidence.test_interop import unpacked  # noqa: F401 (a fixture)

try:
    from google.protobuf import json_format
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    MISSING = ""
except ImportError as exc:  # pragma: no cover - only on a machine without the interop group
    MISSING = f"{exc.name} is not installed (pip install -e .[interop])"


@pytest.fixture(autouse=True)
def libraries() -> None:
    require("interop", not MISSING, MISSING)


def envelope_of(run: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / PROVENANCE).read_text())
    return loaded


def key_of(run: Path, keyid: str) -> SSlibKey:
    """The reviewer's key: the archive's PEM file (its key id is the one minisign prints)."""
    public = load_pem_public_key((run / PUBKEY_PEM).read_bytes())
    return SSlibKey.from_crypto(public, keyid=keyid)  # type: ignore[arg-type]


def test_securesystemslib_verifies_the_envelope_with_the_pem_key(
    unpacked: Path,  # noqa: F811
) -> None:
    document = envelope_of(unpacked)
    keyid = document["signatures"][0]["keyid"]
    envelope = Envelope.from_dict(document)
    accepted = envelope.verify([key_of(unpacked, keyid)], threshold=1)
    assert list(accepted) == [keyid]
    assert envelope.payload_type == "application/vnd.in-toto+json"


def test_securesystemslib_rejects_a_changed_payload(unpacked: Path) -> None:  # noqa: F811
    document = envelope_of(unpacked)
    keyid = document["signatures"][0]["keyid"]
    statement = json.loads(base64.b64decode(document["payload"]))
    statement["predicate"]["runDetails"]["metadata"]["invocationId"] = "someone-else"
    document["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    with pytest.raises(VerificationError):
        Envelope.from_dict(document).verify([key_of(unpacked, keyid)], threshold=1)


def test_securesystemslib_rejects_another_key(unpacked: Path, tmp_path: Path) -> None:  # noqa: F811
    document = envelope_of(unpacked)
    keyid = document["signatures"][0]["keyid"]
    # another key that claims the same key id: the signature, not the id, must decide
    other = tmp_path / "other"
    other.mkdir()
    info = archive(other, Signer.from_file(generate_keypair(other / "keys").secret))
    with tarfile.open(info.path, "r:gz") as tar:
        tar.extractall(other / "x", filter="data")
    with pytest.raises(VerificationError):
        Envelope.from_dict(document).verify(
            [key_of(other / "x" / info.run_dir.name, keyid)], threshold=1
        )


def test_in_toto_attestation_validates_the_statement(unpacked: Path) -> None:  # noqa: F811
    payload = base64.b64decode(envelope_of(unpacked)["payload"])
    proto = json_format.Parse(payload, statement_pb2.Statement())
    statement = Statement.copy_from_pb(proto)
    statement.validate()  # raises ValueError on a malformed Statement
    assert statement.pb.predicate_type == "https://slsa.dev/provenance/v1"
    # every subject is a file of the archive, with the digest sha256sum computes for it
    subjects = {s.name: s.digest["sha256"] for s in statement.pb.subject}
    lines = (unpacked / CHECKSUMS_GNU).read_text().splitlines()
    listed = {name: digest for digest, name in (line.split("  ", 1) for line in lines)}
    assert subjects and subjects.items() <= listed.items()
    for name, digest in subjects.items():
        assert hashlib.sha256((unpacked / name).read_bytes()).hexdigest() == digest


def test_in_toto_attestation_rejects_a_subject_without_digest(unpacked: Path) -> None:  # noqa: F811
    statement = json.loads(base64.b64decode(envelope_of(unpacked)["payload"]))
    statement["subject"][0]["digest"] = {}
    proto = json_format.ParseDict(statement, statement_pb2.Statement())
    with pytest.raises(ValueError, match="digest"):
        Statement.copy_from_pb(proto).validate()


def test_the_readme_snippet_runs_as_written(
    unpacked: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    snippet = next((b for b in blocks if "Envelope.from_dict" in b), None)
    assert snippet is not None, "README.md lost its securesystemslib/in-toto snippet"
    monkeypatch.chdir(unpacked)
    exec(compile(snippet, "README.md", "exec"), {})  # raises if the archive does not check
    envelope = envelope_of(unpacked)
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(64)).decode()
    (unpacked / PROVENANCE).write_text(json.dumps(envelope))
    with pytest.raises(VerificationError):
        exec(compile(snippet, "README.md", "exec"), {})
