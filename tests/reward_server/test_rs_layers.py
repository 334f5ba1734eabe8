"""The reward server's layers, read from its source: the checker never imports the service;
reading never imports comparing; the service reads answers only through the checker's front
door (``grade``); the symbolic worker reads no structure: it builds the trees it is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from source_imports import imports_below

import reward_server

PACKAGE = Path(reward_server.__file__).parent
COMPARING = {"compare", "decide", "symbolic", "grade"}
# What the service may take from the checker: its front door, the types its results carry, where
# a response starts in a query, the format profiles' tags, and the worker's warm-up.
FRONT_DOOR = {"grade", "compare", "pending", "response", "format", "symbolic"}


def _imports(path: Path) -> set[str]:
    return imports_below(path, "reward_server")


def _modules(package: str) -> list[Path]:
    return sorted((PACKAGE / package).glob("*.py"))


@pytest.mark.parametrize("path", _modules("checker"), ids=lambda p: p.stem)
def test_the_checker_never_imports_the_service(path: Path) -> None:
    assert not {m for m in _imports(path) if m.startswith("service")}


@pytest.mark.parametrize(
    "path", [p for p in _modules("checker") if p.stem not in COMPARING], ids=lambda p: p.stem
)
def test_reading_never_imports_comparing(path: Path) -> None:
    imported = {m.split(".")[1] for m in _imports(path) if m.startswith("checker.")}
    assert not imported & COMPARING


@pytest.mark.parametrize("path", _modules("service"), ids=lambda p: p.stem)
def test_the_service_reads_answers_only_through_the_front_door(path: Path) -> None:
    imported = {m.split(".")[1] for m in _imports(path) if m.startswith("checker.")}
    assert imported <= FRONT_DOOR, imported - FRONT_DOOR


def test_the_symbolic_worker_reads_no_structure() -> None:
    """It is sent typed checks (``pending.SymbolicCheck``): it splits no equation, finds no
    congruence and strips no unit; it builds sympy objects from the trees it is given."""
    imported = {m for m in _imports(PACKAGE / "checker" / "symbolic.py") if m.startswith("checker")}
    modules = {m.split(".")[1] for m in imported if "." in m}
    assert not modules & {"reading", "sentence", "units", "policy", "extract", "guard", "decide"}
    assert {m for m in imported if m.startswith("checker.relations.")} == {
        "checker.relations.congruence_value"
    }
    built = {m.split(".")[1] for m in _imports(PACKAGE / "checker" / "build.py") if "." in m}
    assert built <= {"numbers", "tree"}, built
