"""The docs stay in step with the code: every GTPO knob is documented with its real default,
every link between pages lands on a page and a heading that exist, and README stays a map.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from gtpo.config import GTPOConfig, flag

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "recipes").glob("*.md")]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6} (.+)$", line)):
            anchors.add(_slug(m.group(1)))
    return anchors


def _knob_table_rows() -> dict[str, str]:
    """`--gtpo.<name>` -> its default cell, from the one knob table (docs/core-api.md)."""
    rows = {}
    for line in (ROOT / "docs" / "core-api.md").read_text().splitlines():
        m = re.match(r"^\| `(--gtpo\.\w+)[^`]*` \| `\w+` \| ([^|]+) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip().strip("`")
    return rows


def test_every_gtpo_knob_is_in_the_knob_table_with_its_default() -> None:
    rows = _knob_table_rows()
    fields = dataclasses.fields(GTPOConfig)
    assert set(rows) == {flag(f.name) for f in fields}, "docs/core-api.md GTPOConfig table"
    for f in fields:
        cell = rows[flag(f.name)]
        if f.default is None:
            assert cell == "measured", (f.name, cell)
        elif isinstance(f.default, bool):
            assert cell == ("on" if f.default else "off"), (f.name, cell)
        elif isinstance(f.default, str):
            assert cell == f.default, (f.name, cell)
        else:
            assert float(cell) == pytest.approx(float(f.default)), (f.name, cell)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_land_on_a_page_and_a_heading(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, broken


def test_readme_is_a_map() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall("\n".join(lines))}
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if p.name not in linked]
    assert "recipes" in {Path(t.partition("#")[0]).name for t in LINK.findall("\n".join(lines))}
    assert not missing, f"docs pages README does not link: {missing}"


def test_no_table_appears_twice() -> None:
    """A table's header and first row identify it; the same pair twice is a copy to keep in step."""
    seen: dict[tuple[str, str], str] = {}
    for page in PAGES:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines[:-2]):
            if line.startswith("|") and re.match(r"^\|[\s\-:|]+\|$", lines[i + 1]):
                key = (line.strip(), lines[i + 2].strip())
                assert key not in seen, f"the same table in {seen[key]} and {page.name}"
                seen[key] = page.name


def test_the_wheel_the_docs_install_is_the_one_make_dist_builds() -> None:
    """`make dist` names its wheel after pyproject.toml's version; the install lines must too."""
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    named = {
        m
        for page in PAGES
        for m in re.findall(r"gtpo-([\w.]+)-py3-none-any\.whl", page.read_text())
    }
    assert named == {version}, named


def test_gtpo_commands_in_the_docs_parse() -> None:
    """Every `gtpo …` command in a ```bash block is one the `gtpo` CLI accepts."""
    import shlex

    from gtpo.cli import build_parser

    bad = []
    for page in PAGES:
        for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", page.read_text(), re.M | re.S):
            for line in block.replace("\\\n", " ").splitlines():
                if not re.match(r"^\s*gtpo\s", line):
                    continue
                try:
                    build_parser().parse_args(shlex.split(line, comments=True)[1:])
                except SystemExit:
                    bad.append(f"{page.name}: {line.strip()[:120]}")
    assert not bad, bad
