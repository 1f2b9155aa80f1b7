"""JSON Schemas: of the files the lab writes (validated before they are written) and of the
scenario files it reads (validated after the loader's own checks).

validate_results(run.to_dict())                        # SchemaError naming the failing path
validate_document(summary, "run-summary")              # the --json outputs of run, evaluate
validate_scenario(data, Path("scenarios/x.yaml"))      # ScenarioError naming the file and key
validate_campaign_task(data, Path("campaigns/speedup.yaml"))   # CampaignError, the same way
validate_task(data, Path("campaigns/safe-store/task.yaml"))     # TaskError, the same way
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.errors import CampaignError, LabError, ScenarioError, SchemaError, TaskError

if TYPE_CHECKING:
    import jsonschema

#: the schema every run ships beside its results.json, which names it in ``$schema``
RESULTS_SCHEMA_FILE = "results.schema.json"


def schema_bytes(name: str) -> bytes:
    """A schema file exactly as the package ships it (copied into every run directory)."""
    return resources.files(__package__).joinpath(name).read_bytes()


@cache
def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(schema_bytes(name).decode("utf-8"))
    return schema


def results_schema() -> dict[str, Any]:
    return _schema("results.schema.json")


def scenario_schema() -> dict[str, Any]:
    return _schema("scenario.schema.json")


def validate_results(document: dict[str, Any]) -> None:
    # imported here: jsonschema (with referencing, rpds, attrs) takes ~50 ms to import, and
    # the passes of a run start before anything is validated but its input files
    import jsonschema

    validator = jsonschema.Draft202012Validator(
        results_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise SchemaError(
            f"results.json does not match lab/schemas/results.schema.json at '{where}': "
            f"{error.message}; this is a bug in the lab, please report it."
        )


#: the ``--json`` documents with a schema here (``<name>.schema.json``)
SUMMARY_SCHEMAS = ("run-summary", "evaluation-summary", "campaign-summary")


def validate_document(document: dict[str, Any], name: str) -> None:
    """Raise ``SchemaError`` when a ``--json`` document breaks ``<name>.schema.json``."""
    import jsonschema

    schema = _schema(f"{name}.schema.json")
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise SchemaError(
            f"the --json document does not match lab/schemas/{name}.schema.json at '{where}': "
            f"{error.message}; this is a bug in the lab, please report it."
        )


def validate_scenario(document: Any, path: Path) -> None:
    """Raise one sentence naming ``path`` and the key when ``document`` breaks the schema.

    A document that passed this very schema before is not checked again: its digest (over
    the schema's bytes and the document's canonical JSON) is kept as an empty file in the
    lab's cache directory (``lab.resources.cache_dir``), the directory the lab already
    trusts for the sandbox's own programs. Every run reads its scenario files before its
    first pass, and jsonschema alone takes ~50 ms to import; a changed file has another
    digest and is checked."""
    marker = _validated_marker(document, "scenario.schema.json")
    if marker is not None and marker.is_file():
        return
    _validate_input(document, path, scenario_schema(), ScenarioError)
    if marker is not None:
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()


def _validated_marker(document: Any, name: str) -> Path | None:
    """Where the record that ``document`` passed schema ``name`` is kept (None when the
    document has no canonical JSON form, e.g. a YAML timestamp: it is then always checked)."""
    from lab import __version__
    from lab.resources import cache_dir

    try:
        canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    digest = hashlib.sha256()
    for part in (__version__.encode(), schema_bytes(name), canonical.encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    key = digest.hexdigest()
    return cache_dir() / "validated" / name.removesuffix(".schema.json") / key


def validate_campaign_task(document: Any, path: Path) -> None:
    """A campaign task file (``campaigns/*.yaml``) against ``campaign-task.schema.json``."""
    _validate_input(document, path, _schema("campaign-task.schema.json"), CampaignError)


def validate_task(document: Any, path: Path) -> None:
    """A fixture task file (``campaigns/*/task.yaml``) against ``task.schema.json``."""
    _validate_input(document, path, _schema("task.schema.json"), TaskError)


def _validate_input(
    document: Any, path: Path, schema: dict[str, Any], kind: type[LabError]
) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    raise kind(f"{path}: key '{key.lstrip('.') or '(top level)'}' {_problem(error)}.")


def _problem(error: jsonschema.ValidationError) -> str:
    """The schema's complaint in words that do not repeat the (possibly huge) value."""
    bound = error.validator_value
    listed = ", ".join(map(str, bound)) if isinstance(bound, list) else str(bound)
    words = {
        "maxLength": f"is longer than {bound} characters; shorten it",
        "maxItems": f"has more than {bound} items; shorten it",
        "minimum": f"must be at least {bound}",
        "maximum": f"must be at most {bound}",
        "pattern": f"does not match the pattern {bound}",
        "enum": f"must be one of {listed}",
        "type": f"must be of type {bound}",
        "required": "is missing a required key",
        "additionalProperties": "has a key that is not allowed",
        "oneOf": "must name exactly one of 'command' and 'oracle'",
        "const": f"must be {bound}",
        "minItems": f"must have at least {bound} item(s)",
    }
    return words.get(str(error.validator), "does not match the file's schema")
