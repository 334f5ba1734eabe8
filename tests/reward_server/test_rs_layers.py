"""The reward server's layers, read from its source: the checker never imports the service;
reading never imports comparing; the service reads answer text only through ``reading`` and
``decide``; the symbolic worker reads no structure from the texts it is sent."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import reward_server

PACKAGE = Path(reward_server.__file__).parent
COMPARING = {"compare", "decide", "symbolic"}
# Modules that parse an answer's text; the service goes through reading and decide instead.
ANSWER_PARSERS = {"sentence", "notation", "normalize", "values", "relations", "units", "numbers"}


def _imports(path: Path) -> set[str]:
    """Every ``reward_server`` module or name ``path`` imports, at any depth (a function's
    import included), as dotted names below ``reward_server``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reward_server"):
            module = node.module.removeprefix("reward_server").lstrip(".")
            out.add(module)
            out |= {f"{module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            out |= {
                a.name.removeprefix("reward_server.")
                for a in node.names
                if a.name.startswith("reward_server")
            }
    return out


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
def test_the_service_reads_answers_only_through_reading_and_decide(path: Path) -> None:
    imported = {m.split(".")[1] for m in _imports(path) if m.startswith("checker.")}
    assert not imported & ANSWER_PARSERS


def test_the_symbolic_worker_reads_no_structure() -> None:
    """It is sent typed checks (``pending.SymbolicCheck``): it splits no equation, finds no
    congruence and strips no unit; it only evaluates the sides it is given."""
    imported = _imports(PACKAGE / "checker" / "symbolic.py")
    checker_names = {m for m in imported if m.count(".") == 2 and m.startswith("checker.")}
    assert checker_names == {"checker.pending.SymbolicCheck", "checker.relations.congruence_value"}
