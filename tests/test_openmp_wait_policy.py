"""tests/conftest.py's OpenMP wait policy: torch's threads sleep when they wait, in every test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# libgomp prints its settings when it starts, OMP_WAIT_POLICY among them.
SHOW_SETTINGS = {"OMP_DISPLAY_ENV": "TRUE"}


def test_torch_in_a_process_a_test_starts_waits_passively():
    if os.environ.get("GTPO_TEST_SET_OMP_WAIT_POLICY") != "1":
        pytest.skip("the caller chose OMP_WAIT_POLICY; tests/conftest.py keeps it")
    shown = subprocess.run(
        [sys.executable, "-c", "import torch; torch.ones(4096, 64).sum(0)"],
        env={**os.environ, **SHOW_SETTINGS}, capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in shown, shown


def test_torch_was_not_loaded_in_the_test_process_before_the_policy_was_set(pytestconfig):
    # libgomp reads the policy once, when torch first loads it: had a plugin imported torch
    # before tests/conftest.py, TRL's training in the pytest process would still spin.
    (conftest,) = [
        plugin for plugin in pytestconfig.pluginmanager.get_plugins()
        if Path(getattr(plugin, "__file__", None) or "/").resolve() == TESTS / "conftest.py"
    ]  # fmt: skip
    assert conftest.TORCH_LOADED_BEFORE_OMP_WAIT is False
