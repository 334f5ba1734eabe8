"""`make dist`: the one wheel the docs install on every node, with both packages and the entry
points the docs call."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_dist_builds_the_wheel_the_docs_install(tmp_path):
    out = tmp_path / "dist"
    # DIST may be the folder of the wheels carried to a GPU machine beside this one: `make dist`
    # replaces an older gtpo wheel and keeps the others (it once removed the whole folder).
    out.mkdir()
    (out / "trl-1.16.0-py3-none-any.whl").write_bytes(b"another package's wheel")
    (out / "gtpo-0.0.1-py3-none-any.whl").write_bytes(b"an older build")
    done = subprocess.run(
        ["make", "-s", "dist", f"DIST={out}", f"PYTHON={sys.executable}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert (out / "trl-1.16.0-py3-none-any.whl").read_bytes() == b"another package's wheel"
    wheels = list(out.glob("gtpo-*.whl"))
    assert [w.name for w in wheels] == [f"gtpo-{version}-py3-none-any.whl"]
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        entry_points = wheel.read(f"gtpo-{version}.dist-info/entry_points.txt").decode()
        metadata = wheel.read(f"gtpo-{version}.dist-info/METADATA").decode()
    for module in (
        "gtpo/openrlhf/__main__.py",
        "gtpo/openrlhf/plan.py",
        "reward_server/service/app.py",
    ):
        assert module in names, module
    for script in ("gtpo-openrlhf", "gtpo-reward-server", "gtpo ="):
        assert script in entry_points, script
    assert "Provides-Extra: openrlhf" in metadata and "Provides-Extra: server" in metadata
