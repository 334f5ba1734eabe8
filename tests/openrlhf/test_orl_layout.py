"""The Ray actors' modules never import the launcher's.

`gtpo-openrlhf` parses flags, checks the command line and plans memory at start-up (the
launcher); OpenRLHF then builds GTPO's Ray actors, which only train. An actor that imported
`flags` pulled `checks`, `plan` and `memory` into every rank and engine (`controller` reached 11
of the package's modules, through `controller → flags → checks → memory`; now 8, none of
them the launcher's).
"""

from __future__ import annotations

from pathlib import Path

from source_imports import imports_below

PACKAGE = Path(__file__).resolve().parents[2] / "plugin" / "gtpo" / "openrlhf"
LAUNCHER = {"__main__", "flags", "checks", "plan", "memory", "dry_imports"}
# The modules OpenRLHF's processes import: the classes `seam` has OpenRLHF build, and theirs.
ACTORS = {"seam", "controller", "experience", "policy", "rollout_actor", "async_training"}


def package_imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module → the modules of `package` it imports (at any depth of its code)."""
    graph = {}
    for path in package.glob("*.py"):
        names = imports_below(path, "gtpo." + package.name)
        found = {name.split(".")[0] for name in names if name}
        graph[path.stem] = {module for module in found if (package / f"{module}.py").exists()}
    return graph


def reached_from(start: str, graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Every module `start` imports, directly or not → the shortest chain that imports it."""
    chains = {start: [start]}
    frontier = [start]
    while frontier:
        module = frontier.pop(0)
        for imported in sorted(graph[module]):
            if imported not in chains:
                chains[imported] = [*chains[module], imported]
                frontier.append(imported)
    return chains


def test_no_actor_module_reaches_a_launcher_module():
    graph = package_imports()
    assert graph.keys() >= ACTORS and graph.keys() >= LAUNCHER  # the names above still exist
    reached = {
        " → ".join(chain)
        for actor in sorted(ACTORS)
        for module, chain in reached_from(actor, graph).items()
        if module in LAUNCHER
    }
    assert not reached, f"actor modules import the launcher: {sorted(reached)}"


def test_the_graph_reader_finds_a_chain_through_every_import_form(tmp_path):
    package = tmp_path / "openrlhf"
    package.mkdir()
    (package / "a.py").write_text("from gtpo.openrlhf import b\n")
    (package / "b.py").write_text("def f():\n    from gtpo.openrlhf.c import x\n")
    (package / "c.py").write_text("import gtpo.openrlhf.d\nimport json\n")
    (package / "d.py").write_text("")
    chains = reached_from("a", package_imports(package))
    assert chains["d"] == ["a", "b", "c", "d"]
    assert "json" not in chains
