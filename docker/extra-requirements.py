"""Print the requirements of some of pyproject.toml's extras, one per line, for pip -r.

    python3 docker/extra-requirements.py pyproject.toml server          # the server extra
    python3 docker/extra-requirements.py --core pyproject.toml demo     # core deps + demo extra

The images install the project's own wheel with --no-deps and its requirements from this list,
so that (1) the reward-server image gets the `server` extra without the core `torch` dependency
the server never imports, and (2) the dependency layer is cached apart from the source. Reading
pyproject.toml keeps one source of truth; self-references such as "gtpo[server]" are expanded.
Standard library only (tomllib: Python 3.11+, the images' Python).
"""

from __future__ import annotations

import re
import sys

import tomllib


def requirements(project: dict, extras: list[str], core: bool) -> list[str]:
    name = project["name"]
    optional = project.get("optional-dependencies", {})
    self_ref = re.compile(rf"^{re.escape(name)}\s*\[(?P<extras>[^\]]+)\]\s*$")
    out: list[str] = list(project.get("dependencies", [])) if core else []
    seen: set[str] = set()
    todo = list(extras)
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        if extra not in optional:
            sys.exit(f"extra-requirements: pyproject.toml has no extra {extra!r}")
        seen.add(extra)
        for req in optional[extra]:
            match = self_ref.match(req)
            if match:
                todo.extend(e.strip() for e in match["extras"].split(","))
            elif req not in out:
                out.append(req)
    return out


def main(argv: list[str]) -> None:
    core = "--core" in argv
    args = [a for a in argv if a != "--core"]
    if len(args) < 2:
        sys.exit(__doc__)
    with open(args[0], "rb") as f:
        project = tomllib.load(f)["project"]
    print("\n".join(requirements(project, args[1:], core)))


if __name__ == "__main__":
    main(sys.argv[1:])
