"""JSON Schemas of the files the lab writes; every file is validated before it is written.

validate_results(run.to_dict())   # raises SchemaError naming the failing path
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from lab.errors import SchemaError


@cache
def results_schema() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("results.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_results(document: dict[str, Any]) -> None:
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
