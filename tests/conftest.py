"""Puts tests/ on sys.path: shared helpers (paper_reference.py) import as top-level modules.

pytest runs with --import-mode=importlib, which does not add test folders to sys.path.
"""

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
