"""tests/conftest.py's OpenMP wait policy: torch's threads sleep when they wait, in every test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

TESTS = Path(__file__).resolve().parent

# libgomp prints its settings when it starts, OMP_WAIT_POLICY among them.
SHOW_SETTINGS = {"OMP_DISPLAY_ENV": "TRUE"}


@pytest.fixture
def conftest(pytestconfig) -> ModuleType:
    """tests/conftest.py as pytest loaded it (--import-mode=importlib: not importable by name)."""
    (module,) = [
        plugin for plugin in pytestconfig.pluginmanager.get_plugins()
        if Path(getattr(plugin, "__file__", None) or "/").resolve() == TESTS / "conftest.py"
    ]  # fmt: skip
    return module


def test_torch_in_a_process_a_test_starts_waits_passively(conftest):
    if os.environ.get(conftest.OMP_WAIT_SET_HERE) != "1":
        pytest.skip("the caller chose OMP_WAIT_POLICY; tests/conftest.py keeps it")
    shown = subprocess.run(
        [sys.executable, "-c", "import torch; torch.ones(4096, 64).sum(0)"],
        env={**os.environ, **SHOW_SETTINGS}, capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in shown, shown


def test_torch_was_not_loaded_in_the_test_process_before_the_policy_was_set(conftest):
    # libgomp reads the policy once, when torch first loads it: had a plugin imported torch
    # before tests/conftest.py, TRL's training in the pytest process would still spin.
    assert conftest.TORCH_LOADED_BEFORE_OMP_WAIT is False
