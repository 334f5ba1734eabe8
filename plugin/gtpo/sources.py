"""Reading the source of the frameworks GTPO extends, for their start-up checks
(`gtpo.openrlhf.compat`, `gtpo.trl.internals`): an attribute a framework sets on its objects in
a method (`self.name = …`) is not on its class, so whether a release still sets it is read from
the release's own code."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any


def source_of(obj: Any) -> str:
    """The source of a class or function ("" when Python cannot read it)."""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return ""


def assigned_on_self(source: str) -> set[str]:
    """The attributes a class's methods assign on `self`, from the class's source: plain,
    annotated, augmented and tuple targets."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)) if source else ():
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        else:
            continue
        names |= {
            part.attr
            for target in targets
            for part in ast.walk(target)
            if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name)
            if part.value.id == "self"
        }
    return names
