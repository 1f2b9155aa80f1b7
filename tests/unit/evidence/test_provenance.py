"""DSSE and the SLSA statement, checked against the DSSE specification's test vectors."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lab.errors import SigningError
from lab.evidence.keys import PublicKey, SecretKey
from lab.evidence.provenance import (
    BUILD_TYPE,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    ProvenanceInputs,
    build_statement,
    envelope_line,
    open_envelope,
    pae,
    sign_envelope,
    verify_envelope,
)
from lab.evidence.signing import Signer


@pytest.fixture
def vectors(assets: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((assets / "signing" / "dsse-vectors.json").read_text())
    return data


def key_a(vectors: dict[str, Any]) -> tuple[Signer, PublicKey]:
    seed = bytes.fromhex(vectors["keys"]["A"]["seed"])
    private = Ed25519PrivateKey.from_private_bytes(seed)
    secret = SecretKey(private=private, keynum=b"\0" * 8)
    assert secret.public.raw.hex() == vectors["keys"]["A"]["public"]
    signer = Signer(key=secret, ephemeral=False, source="dsse test key A")
    return signer, PublicKey(raw=secret.public.raw)


def test_pae_protocol_example(vectors: dict[str, Any]) -> None:
    example = vectors["protocol_example"]
    got = pae(example["payloadType"], example["body"].encode())
    assert got == example["pae"].encode()


def test_pae_of_every_accepted_vector(vectors: dict[str, Any]) -> None:
    # A rejected vector's "pae" is what its signature covers, not its envelope's PAE.
    for vector in [v for v in vectors["vectors"] if v["expect"] == "accept"]:
        envelope = vector["envelope"]
        payload = envelope["payload"].replace("-", "+").replace("_", "/")
        body = base64.b64decode(payload)
        assert pae(envelope["payloadType"], body).hex() == vector["pae"], vector["id"]


def test_dsse_vectors_accept_and_reject(vectors: dict[str, Any]) -> None:
    _, public = key_a(vectors)
    for vector in vectors["vectors"]:
        types = tuple(vector["supportedPayloadTypes"])
        if vector["expect"] == "accept":
            verify_envelope(vector["envelope"], public, what=vector["id"], payload_types=types)
        else:
            with pytest.raises(SigningError):
                verify_envelope(vector["envelope"], public, what=vector["id"], payload_types=types)


def test_our_signature_matches_the_vector(vectors: dict[str, Any]) -> None:
    """Ed25519 is deterministic: signing the vector's statement gives the vector's sig."""
    signer, _ = key_a(vectors)
    vector = vectors["vectors"][0]
    statement = json.loads(base64.b64decode(vector["envelope"]["payload"]))
    envelope = sign_envelope(statement, signer)
    assert envelope["payload"] == vector["envelope"]["payload"]
    assert envelope["signatures"][0]["sig"] == vector["envelope"]["signatures"][0]["sig"]


def inputs(**changes: Any) -> ProvenanceInputs:
    values: dict[str, Any] = {
        "run_id": "20260101T000000Z-abc123",
        "started_on": "2026-01-01T00:00:00Z",
        "finished_on": "2026-01-01T00:05:00Z",
        "scenarios": ["baseline", "false-success"],
        "options": {"collector": "all", "repetitions": 1},
        "image_name": "execution-evidence-lab",
        "image_digest": "sha256:" + "a" * 64,
        "git_repository": "git+https://example.invalid/lab",
        "git_commit": "b" * 40,
        "git_dirty": False,
        "client_path": "native/build/backup-client",
        "client_digest": "c" * 64,
        "kernel": "6.18.0",
        "tool_versions": {"strace": "6.1", "bpftrace": "0.17.0"},
        "lab_version": "0.1.0",
    }
    values.update(changes)
    return ProvenanceInputs(**values)


def test_statement_shape() -> None:
    signer = Signer.ephemeral()
    statement = build_statement({"b.txt": "2" * 64, "a.txt": "1" * 64}, inputs(), signer=signer)
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == PREDICATE_TYPE
    assert [s["name"] for s in statement["subject"]] == ["a.txt", "b.txt"]
    assert statement["subject"][0]["digest"] == {"sha256": "1" * 64}
    build = statement["predicate"]["buildDefinition"]
    assert build["buildType"] == BUILD_TYPE
    assert build["externalParameters"]["scenarios"] == ["baseline", "false-success"]
    assert build["internalParameters"]["signing"] == {
        "keyId": signer.key_id,
        "ephemeral": True,
    }
    deps = {d["name"]: d for d in build["resolvedDependencies"]}
    assert deps["source"]["digest"] == {"gitCommit": "b" * 40}
    assert deps["image"]["digest"] == {"sha256": "a" * 64}
    assert deps["client"]["digest"] == {"sha256": "c" * 64}
    metadata = statement["predicate"]["runDetails"]["metadata"]
    assert metadata == {
        "invocationId": "20260101T000000Z-abc123",
        "startedOn": "2026-01-01T00:00:00Z",
        "finishedOn": "2026-01-01T00:05:00Z",
    }


def test_missing_dependencies_are_left_out() -> None:
    statement = build_statement({}, inputs(image_digest=None, git_commit=None, client_digest=None))
    assert statement["predicate"]["buildDefinition"]["resolvedDependencies"] == []


def test_envelope_round_trip_is_one_line_and_deterministic() -> None:
    signer = Signer.ephemeral()
    statement = build_statement({"a": "1" * 64}, inputs(), signer=signer)
    line = envelope_line(sign_envelope(statement, signer))
    assert line.endswith("\n") and line.count("\n") == 1
    assert line == envelope_line(sign_envelope(statement, signer))
    envelope = json.loads(line)
    assert envelope["payloadType"] == PAYLOAD_TYPE
    assert envelope["signatures"][0]["keyid"] == signer.key_id
    assert open_envelope(envelope, signer.public_key, what="p") == statement


def test_envelope_rejects_other_key_and_changed_payload() -> None:
    signer = Signer.ephemeral()
    envelope = sign_envelope(build_statement({"a": "1" * 64}, inputs()), signer)
    with pytest.raises(SigningError, match="no signature in the envelope verifies"):
        open_envelope(envelope, Signer.ephemeral().public_key, what="p")
    body = base64.b64decode(envelope["payload"]).replace(b"baseline", b"baseLine")
    changed = dict(envelope, payload=base64.b64encode(body).decode())
    with pytest.raises(SigningError, match="no signature"):
        open_envelope(changed, signer.public_key, what="p")
    with pytest.raises(SigningError, match="no signatures"):
        open_envelope(dict(envelope, signatures=[]), signer.public_key, what="p")
