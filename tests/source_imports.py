"""What a source file imports from one package, read from its text (no import runs): the layer
tests of the reward server and of the OpenRLHF adapter hold their packages' structure on it."""

from __future__ import annotations

import ast
from pathlib import Path


def imports_below(path: Path, package: str) -> set[str]:
    """Every module or name below ``package`` that ``path`` imports, at any depth (a function's
    import included), as dotted names relative to ``package`` ("" for the package itself):
    ``from package.a import b`` gives "a" and "a.b"."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package):
            module = node.module.removeprefix(package).lstrip(".")
            out.add(module)
            out |= {f"{module}.{alias.name}".lstrip(".") for alias in node.names}
        elif isinstance(node, ast.Import):
            out |= {
                a.name.removeprefix(package).lstrip(".")
                for a in node.names
                if a.name.startswith(package)
            }
    return out
