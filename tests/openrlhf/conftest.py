"""Shared set-up for the OpenRLHF adapter tests.

OpenRLHF imports `flash_attn` and `vllm` at module level. flash-attn does not install without
CUDA: `tests/standins` (see its README) is appended to sys.path when it is missing. vLLM's CPU
build does (`make install`); where it is missing, the stand-in engine `tests/standins/hf_engine`
is appended too. Appended, so a real install always wins. Everything else is the real OpenRLHF
(the release `gtpo.openrlhf.compat` names).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

# Keep the test Ray cluster on loopback: with this off, Ray uses 127.0.0.1 as the node address
# instead of resolving the machine's outward IP (ray._private.services.get_node_ip_address).
# Set before anything imports ray; inherited by the Ray worker processes.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

STANDINS = Path(__file__).resolve().parents[1] / "standins"
# tests/standins itself always: the stand-in engine's weight sync imports vllm_cpu_transport.
STANDIN_PATHS = [str(STANDINS)]
if importlib.util.find_spec("vllm") is None:
    STANDIN_PATHS.append(str(STANDINS / "hf_engine"))
for _path in STANDIN_PATHS:
    if _path not in sys.path:
        sys.path.append(_path)
# fit_harness.py is imported by test_orl_fit.py as a top-level module (--import-mode=importlib
# does not put test folders on sys.path).
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

# Minimal valid command line for train_ppo_ray under GTPO (OpenRLHF's own defaults otherwise).
BASE_ARGV = [
    "--actor.model_name_or_path",
    "tiny-model",
    "--reward.remote_url",
    "http://127.0.0.1:8000/get_reward",
    "--algo.advantage.estimator",
    "group_norm",
    "--algo.kl.init_coef",
    "0",
    "--rollout.n_samples_per_prompt",
    "4",
    "--rollout.batch_size",
    "8",
    "--train.batch_size",
    "32",
    "--vllm.num_engines",
    "1",
    "--actor.num_gpus_per_node",
    "1",
]


class Captured(Exception):
    """Raised by the stand-in get_strategy to hand the final args back to the test."""

    def __init__(self, args: Any) -> None:
        super().__init__("captured")
        self.captured_args = args


def run_train_ppo_ray(
    monkeypatch: pytest.MonkeyPatch, argv: Sequence[str], *, gtpo: bool = True
) -> Any:
    """Run train_ppo_ray as __main__ (through the launcher when gtpo) up to train(args).

    Stops at OpenRLHF's `get_strategy(args)`, the first thing train() does once Ray is up, and
    returns the args exactly as OpenRLHF's train() received them.
    """
    pytest.importorskip("openrlhf")
    import runpy

    import openrlhf.utils
    import ray

    def capture(args: Any) -> Any:
        raise Captured(args)

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(openrlhf.utils, "get_strategy", capture)
    try:
        if gtpo:
            from gtpo.openrlhf.__main__ import main

            main(list(argv))
        else:
            monkeypatch.setattr(sys, "argv", ["train_ppo_ray", *argv])
            runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__", alter_sys=False)
    except Captured as captured:
        return captured.captured_args
    raise AssertionError("train_ppo_ray returned before calling train(args)")


@pytest.fixture
def run_orl(monkeypatch: pytest.MonkeyPatch):
    """Factory: args as train_ppo_ray's train() receives them, via the launcher or without it."""

    def run(argv: Sequence[str], gtpo: bool = True) -> Any:
        return run_train_ppo_ray(monkeypatch, argv, gtpo=gtpo)

    return run


@pytest.fixture
def openrlhf_args(run_orl):
    """Factory: hierarchized args from the launcher for BASE_ARGV plus extra flags."""

    def make(*extra: str) -> Any:
        return run_orl([*BASE_ARGV, *extra])

    return make


@pytest.fixture
def base_argv() -> list[str]:
    return list(BASE_ARGV)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A real local Ray cluster on CPU, on loopback, whose workers see the stand-ins too.

    Module scope: the cluster's processes are gone before other test directories run.
    """
    ray = pytest.importorskip("ray")
    paths = list(STANDIN_PATHS)
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    # Its workers at the machine's normal priority: Ray starts them at niceness 15 (its
    # worker_niceness, read by the raylet ray.init starts), and beside two CPU-bound processes
    # they got 3-4 % of a core; the default stage beside two such processes took 985 s, 633 s
    # with this. The slow stage's fit() runs keep Ray's default: with it set for them too, the
    # slow stage took 61.3 minutes against 57.9-58.9 in the two runs before (one run each).
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_worker_niceness", "0")
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
            log_to_driver=False,
        )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def fixture_files(tmp_path_factory):
    """The toy fit() files (tiny Llama, tokenizer, prompts) of fit_harness, built once per
    pytest process (its warm start took about 30 s of CPU, once for each module that used it;
    no test writes to them); the real-model modules override it with the real model's."""
    from fit_harness import build_fixture

    return build_fixture(tmp_path_factory.mktemp("fit-fixture"))


@pytest.fixture(scope="module")
def reward_server(tmp_path_factory):
    """A live reward server on 127.0.0.1 (its own process), one per module."""
    from gtpo.local_reward_server import LocalRewardServer

    with LocalRewardServer(tmp_path_factory.mktemp("fit-rs") / "reward_server.log") as live:
        live.wait()
        yield live
