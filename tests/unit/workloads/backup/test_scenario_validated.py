"""A scenario document that passed its schema is recorded in the lab's cache and not checked
again; a changed document is checked, and one that fails is never recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lab import schemas
from lab.errors import ScenarioError


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "execution-evidence-lab" / "validated" / "scenario"


def _count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = schemas._validate_input

    def counting(*args: object, **kwargs: object) -> None:
        calls.append(1)
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(schemas, "_validate_input", counting)
    return calls


#: a shipped scenario, as its loader hands it to the schema
DOC = yaml.safe_load(
    (Path(__file__).resolve().parents[4] / "scenarios" / "baseline.yaml").read_text()
)


def test_a_document_that_passed_is_not_checked_again(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count(monkeypatch)
    schemas.validate_scenario(DOC, Path("x.yaml"))
    schemas.validate_scenario(DOC, Path("x.yaml"))
    assert calls == [1] and len(list(cache.iterdir())) == 1
    changed = {**DOC, "description": "another"}
    schemas.validate_scenario(changed, Path("x.yaml"))
    assert calls == [1, 1] and len(list(cache.iterdir())) == 2


def test_a_document_that_fails_is_never_recorded(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count(monkeypatch)
    bad = {**DOC, "description": "x" * 100_000}
    for _ in range(2):
        with pytest.raises(ScenarioError, match=r"x\.yaml: key 'description'"):
            schemas.validate_scenario(bad, Path("x.yaml"))
    assert calls == [1, 1] and not cache.exists()


def test_a_document_without_a_json_form_is_always_checked(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime

    calls = _count(monkeypatch)
    odd = {**DOC, "description": datetime.date(2026, 12, 3)}
    for _ in range(2):
        with pytest.raises(ScenarioError):
            schemas.validate_scenario(odd, Path("x.yaml"))
    assert calls == [1, 1]
