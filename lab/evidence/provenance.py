"""SLSA provenance for a lab run: an in-toto Statement v1 in a DSSE envelope.

The envelope (``provenance.intoto.jsonl``, one line) follows the DSSE protocol
(github.com/secure-systems-lab/dsse, ``protocol.md``): the signature covers
``PAE(payloadType, payload)``, never the JSON around it. The predicate follows SLSA
provenance v1 (slsa.dev/spec/v1.0/provenance) with our own build type, documented in
``docs/build-type.md``.

    inputs = ProvenanceInputs(run_id="...", started_on="...", finished_on="...",
                              scenarios=["baseline"], options={...}, git_commit="...")
    statement = build_statement({"results.json": "ab12..."}, inputs, signer=signer)
    line = envelope_line(sign_envelope(statement, signer))
    statement = open_envelope(json.loads(line), signer.public_key, what="provenance")
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.errors import SigningError
from lab.evidence.keys import PublicKey
from lab.evidence.signing import Signer

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
#: our build type; what its parameters mean is documented in docs/build-type.md. A URN, not
#: a URL: the project serves no web site, and an identifier must not point at a host that
#: someone else could serve (the description is docs/build-type.md at the source commit)
BUILD_TYPE = "urn:execution-evidence-lab:buildtype:lab-run:v1"
#: archives written before the URN (the same format) still verify
EARLIER_BUILD_TYPES = frozenset({"https://execution-evidence-lab.dev/buildtypes/lab-run/v1"})
#: the builder when nothing names one (``lab.host.identity.builder_id``): a developer's
#: machine, which no one but its owner vouches for
LOCAL_BUILDER_ID = "urn:execution-evidence-lab:builder:local:v1"
#: run options the statement carries elsewhere, never twice: the scenario list is
#: ``externalParameters.scenarios`` and the lab version ``runDetails.builder.version.lab``
_CARRIED_ELSEWHERE = frozenset({"scenarios", "lab_version"})
#: RFC 3986 section 3.1: a URI starts with a scheme, then ":"
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")


#: JSON read from an archive (the envelope, its payload) may nest no deeper than this; the
#: lab's statement nests 6 levels. Checked in one linear pass before ``json.loads``, whose
#: recursion a deeply nested document would otherwise exhaust.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def json_depth_problem(data: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``data`` is too deeply nested to parse, or None; linear, strings skipped."""
    depth = 0
    for byte in _JSON_STRING.sub(b"", data).translate(None, delete=_NOT_BRACKETS):
        depth += 1 if byte in b"[{" else -1
        if depth > max_depth:
            return f"is nested more than {max_depth} levels deep"
    return None


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def loads_bounded(data: bytes, *, what: str) -> Any:
    """``json.loads`` of archive data after :func:`json_depth_problem`; one sentence naming
    ``what`` (a :class:`SigningError`) when it is too deep or not JSON."""
    problem = json_depth_problem(data)
    if problem is not None:
        raise SigningError(f"{what} {problem}; it was not written by the lab.")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SigningError(f"{what} is not valid JSON.") from exc


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 Pre-Authentication Encoding: lengths are byte lengths, in decimal."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(body), body)


@dataclass(frozen=True, kw_only=True)
class ProvenanceInputs:
    """Everything the provenance says about a run besides its output files."""

    run_id: str
    started_on: str  # RFC 3339
    finished_on: str  # RFC 3339
    scenarios: list[str]
    #: the run's options as the user gave them (collectors, repetitions, sizes, ...)
    options: Mapping[str, Any] = field(default_factory=dict)
    image_name: str | None = None
    #: "sha256:<hex>": the lab image's content digest (its layers' OCI ChainID)
    image_digest: str | None = None
    #: "sha256:<hex>": the engine's local image ID (the digest of the image's configuration)
    image_id: str | None = None
    git_repository: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    #: relative path and SHA-256 of the client binary that was judged
    client_path: str | None = None
    client_digest: str | None = None
    #: ``uname -r`` (``platform.release()``): the kernel release the tracers used
    kernel: str | None = None
    tool_versions: Mapping[str, str] = field(default_factory=dict)
    lab_version: str | None = None
    builder_id: str = LOCAL_BUILDER_ID
    #: anything else the builder controlled (host facts, collector availability)
    internal: Mapping[str, Any] = field(default_factory=dict)
    #: further resolved dependencies ({"name", "uri", "digest"}), e.g. the shard archives a
    #: merged run was made of (``lab merge``)
    dependencies: Sequence[Mapping[str, Any]] = ()


def _digest_map(digest: str) -> dict[str, str]:
    algorithm, sep, value = digest.partition(":")
    if not sep:
        return {"sha256": digest}
    return {algorithm: value}


def is_uri(text: str) -> bool:
    """An absolute URI (RFC 3986: a scheme, a colon, no white space)."""
    return bool(_URI_SCHEME.match(text))


def source_uri(repository: str | None, commit: str) -> str | None:
    """The SLSA form of a git source, ``git+https://host/owner/repo@<commit>``, or ``None``
    when the repository has no URI (a local clone): a ResourceDescriptor may omit ``uri``
    when it has a ``digest``, and a made-up one ("git+local@...") is no URI at all."""
    if not repository:
        return None
    repo = repository if repository.startswith("git+") else f"git+{repository}"
    uri = f"{repo}@{commit}"
    return uri if is_uri(repo) and "://" in repo else None


def resolved_dependencies(inputs: ProvenanceInputs) -> list[dict[str, Any]]:
    deps: list[dict[str, Any]] = []
    if inputs.git_commit:
        source: dict[str, Any] = {"name": "source"}
        uri = source_uri(inputs.git_repository, inputs.git_commit)
        if uri is not None:
            source["uri"] = uri
        source["digest"] = {"gitCommit": inputs.git_commit}
        source["annotations"] = {"dirty": inputs.git_dirty}
        deps.append(source)
    if inputs.image_digest or inputs.image_id:
        name = inputs.image_name or "lab"
        image: dict[str, Any] = {"name": "image", "uri": f"docker-image://{name}"}
        if inputs.image_digest:
            image["digest"] = _digest_map(inputs.image_digest)
        if inputs.image_id:
            # the local ID is no content digest (it hashes labels and times too): named apart
            image["annotations"] = {"localImageId": inputs.image_id}
        deps.append(image)
    if inputs.client_digest:
        # no ``uri``: a run-relative path is no URI ("file:" needs an absolute path) and an
        # absolute one would name the builder's disk; the path is an annotation instead
        client: dict[str, Any] = {"name": "client", "digest": _digest_map(inputs.client_digest)}
        if inputs.client_path:
            client["annotations"] = {"path": inputs.client_path}
        deps.append(client)
    deps += [dict(d) for d in inputs.dependencies]
    return deps


def build_statement(
    subjects: Mapping[str, str], inputs: ProvenanceInputs, *, signer: Signer | None = None
) -> dict[str, Any]:
    """An in-toto Statement v1 with a SLSA provenance v1 predicate.

    ``subjects`` maps run-relative paths to SHA-256 hex digests.
    """
    internal: dict[str, Any] = {
        "kernel": inputs.kernel,
        "toolVersions": dict(sorted(inputs.tool_versions.items())),
    }
    internal.update(inputs.internal)
    if signer is not None:
        internal["signing"] = {"keyId": signer.key_id, "ephemeral": signer.is_ephemeral}
    builder: dict[str, Any] = {"id": inputs.builder_id}
    if inputs.lab_version:
        builder["version"] = {"lab": inputs.lab_version}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": subjects[name]}} for name in sorted(subjects)
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "scenarios": list(inputs.scenarios),
                    "options": {
                        k: v for k, v in inputs.options.items() if k not in _CARRIED_ELSEWHERE
                    },
                },
                "internalParameters": internal,
                "resolvedDependencies": resolved_dependencies(inputs),
            },
            "runDetails": {
                "builder": builder,
                "metadata": {
                    "invocationId": inputs.run_id,
                    "startedOn": inputs.started_on,
                    "finishedOn": inputs.finished_on,
                },
            },
        },
    }


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same statement always gives the same bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign_envelope(statement: Mapping[str, Any], signer: Signer) -> dict[str, Any]:
    body = canonical_json(statement)
    signature = signer.sign(pae(PAYLOAD_TYPE, body))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(body).decode("ascii"),
        "signatures": [
            {"keyid": signer.key_id, "sig": base64.b64encode(signature).decode("ascii")}
        ],
    }


def envelope_line(envelope: Mapping[str, Any]) -> str:
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")) + "\n"


def _b64(text: object, *, what: str) -> bytes:
    """DSSE verifiers must accept standard and URL-safe base64 alike."""
    if not isinstance(text, str):
        raise SigningError(f"{what} is not a base64 string.")
    try:
        if "-" in text or "_" in text:
            return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SigningError(f"{what} is not valid base64.") from exc


def verify_envelope(
    envelope: Mapping[str, Any],
    public_key: PublicKey,
    *,
    what: str,
    payload_types: tuple[str, ...] = (PAYLOAD_TYPE,),
) -> bytes:
    """Verify a DSSE envelope against one key and return its payload bytes.

    Follows the protocol's order: decode, verify the signature over PAE, then reject an
    unsupported payload type.
    """
    payload_type = envelope.get("payloadType")
    if not isinstance(payload_type, str):
        raise SigningError(f"{what}: the envelope has no payloadType.")
    body = _b64(envelope.get("payload"), what=f"{what}: payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise SigningError(f"{what}: the envelope has no signatures.")
    message = pae(payload_type, body)
    verified = False
    for index, entry in enumerate(signatures):
        if not isinstance(entry, dict):
            raise SigningError(f"{what}: signature {index} is not an object.")
        sig = _b64(entry.get("sig"), what=f"{what}: signature {index}")
        if public_key.verify(sig, message):
            verified = True
            break
    if not verified:
        raise SigningError(
            f"{what}: no signature in the envelope verifies with key {public_key.key_id}."
        )
    if payload_type not in payload_types:
        raise SigningError(f"{what}: payload type {payload_type!r} is not supported.")
    return body


def open_envelope(envelope: Mapping[str, Any], public_key: PublicKey, *, what: str) -> Any:
    """Verify an in-toto DSSE envelope and return its parsed JSON statement."""
    body = verify_envelope(envelope, public_key, what=what)
    return loads_bounded(body, what=f"{what}: the signed payload")


def invocation_id(statement: Any) -> str | None:
    """The run id a statement names (``runDetails.metadata.invocationId``), or None."""
    predicate = statement.get("predicate") if isinstance(statement, dict) else None
    details = predicate.get("runDetails") if isinstance(predicate, dict) else None
    metadata = details.get("metadata") if isinstance(details, dict) else None
    signed = metadata.get("invocationId") if isinstance(metadata, dict) else None
    return signed if isinstance(signed, str) else None
