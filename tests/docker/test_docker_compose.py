"""compose.yaml and compose.hostnet.yaml, as Compose v2 resolves them (`compose config`).

Every profile is validated by Compose itself, the gpu one included (its image needs CUDA and
cannot be built here), and the resolved services are checked against what the deployment
promises: the reward endpoint on loopback with a readiness healthcheck, the demo waiting for it
and writing to a host volume, the trainer with all GPUs, host IPC and the paper's defaults, and
the host-network override putting everything on 127.0.0.1. Needs only the compose binary.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BASE = ["compose.yaml"]
HOSTNET = ["compose.yaml", "compose.hostnet.yaml"]
PROFILES = {(): {"reward-server"}, ("demo",): {"reward-server", "demo"}}
PROFILES[("gpu",)] = {"reward-server", "trainer"}
PROFILES[("demo", "gpu")] = {"reward-server", "demo", "trainer"}


def env_of(service: dict) -> dict:
    return service.get("environment") or {}


@pytest.mark.parametrize("files", [BASE, HOSTNET], ids=["bridge", "hostnet"])
@pytest.mark.parametrize("profiles", list(PROFILES), ids=lambda p: "+".join(p) or "default")
def test_every_profile_validates_and_selects_its_services(compose_config, files, profiles):
    config = compose_config(files, list(profiles))
    assert set(config["services"]) == PROFILES[profiles]
    for name, service in config["services"].items():
        # The base image is a build argument everywhere (offline base on registry-less hosts).
        assert service["build"]["context"] == str(REPO), name
        assert "BASE_IMAGE" in service["build"]["args"], name
        assert service.get("init") is True, f"{name}: PID 1 must forward signals and reap"


def test_reward_server_is_the_default_service_on_loopback_port_8000(compose_config):
    server = compose_config(BASE, [])["services"]["reward-server"]
    assert "profiles" not in server  # plain `docker compose up` starts it
    assert server["build"]["dockerfile"] == "docker/reward-server.Dockerfile"
    (port,) = server["ports"]
    assert (port["host_ip"], port["published"], port["target"]) == ("127.0.0.1", "8000", 8000)
    env = env_of(server)
    assert env["GTPO_RS_HOST"] == "0.0.0.0"  # inside its own namespace, for the published port
    assert env["GTPO_RS_PORT"] == "8000"
    assert int(env["GTPO_RS_WORKERS"]) >= 2
    # Unset unless the caller sets it: an empty token would switch authentication on.
    assert env["GTPO_RS_API_TOKEN"] is None
    check = server["healthcheck"]["test"]
    assert check[0] == "CMD" and "/readyz" in check[-1]


def test_port_and_workers_follow_the_environment(compose_config):
    server = compose_config(
        BASE, [], GTPO_RS_PORT="9100", GTPO_RS_WORKERS="4", GTPO_RS_BIND="0.0.0.0"
    )["services"]["reward-server"]
    (port,) = server["ports"]
    assert (port["host_ip"], port["published"], port["target"]) == ("0.0.0.0", "9100", 9100)
    assert env_of(server)["GTPO_RS_WORKERS"] == "4"


def test_demo_waits_for_a_healthy_server_and_writes_to_a_host_volume(compose_config):
    demo = compose_config(BASE, ["demo"])["services"]["demo"]
    assert demo["depends_on"]["reward-server"]["condition"] == "service_healthy"
    # Shares the server's network namespace: the demo's loopback-only client reaches it.
    assert demo["network_mode"] == "service:reward-server"
    (volume,) = demo["volumes"]
    assert volume["type"] == "bind" and volume["target"] == "/out"
    assert volume["source"] == str(REPO / "gtpo-demo")
    command = demo["command"]
    assert command[:2] == ["gtpo", "demo"]
    assert command[command.index("--out") + 1] == "/out"
    assert command[command.index("--reward-url") + 1] == "http://127.0.0.1:8000"
    assert demo["build"]["args"]["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"


def test_demo_flags_output_folder_and_torch_source_are_settable(compose_config, tmp_path):
    demo = compose_config(
        BASE,
        ["demo"],
        GTPO_DEMO_ARGS="--quick --seeds 0 1",
        GTPO_DEMO_OUT=str(tmp_path),
        GTPO_TORCH_INDEX_URL="",
        GTPO_PIP_FIND_LINKS="http://127.0.0.1:9/wheels/",
    )["services"]["demo"]
    assert demo["command"][-4:] == ["--quick", "--seeds", "0", "1"]
    assert demo["volumes"][0]["source"] == str(tmp_path)
    # Empty means empty (wheelhouse only), not the default index.
    assert demo["build"]["args"]["TORCH_INDEX_URL"] == ""
    assert demo["build"]["args"]["PIP_FIND_LINKS"] == "http://127.0.0.1:9/wheels/"


def test_gpu_trainer_reserves_every_gpu_with_host_ipc_and_the_papers_defaults(compose_config):
    trainer = compose_config(BASE, ["gpu"])["services"]["trainer"]
    assert trainer["profiles"] == ["gpu"]
    assert trainer["build"]["dockerfile"] == "docker/trainer.Dockerfile"
    assert trainer["build"]["args"]["BASE_IMAGE"].startswith("nvcr.io/nvidia/pytorch:")
    (device,) = trainer["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert device["count"] == -1  # "all"
    assert trainer["ipc"] == "host"
    assert trainer["ulimits"]["memlock"] == -1
    assert trainer["depends_on"]["reward-server"]["condition"] == "service_healthy"
    targets = {v["target"] for v in trainer["volumes"]}
    assert {"/hf", "/data", "/ckpt", "/outputs"} <= targets
    env = env_of(trainer)
    paper = {
        "GTPO_MODEL": "Qwen/Qwen2.5-3B-Instruct",
        "GTPO_N_SAMPLES": "8",
        "GTPO_LR": "1e-6",
        "GTPO_TEMPERATURE": "1.0",
        "GTPO_GAMMA": "0.1",
        "GTPO_KL_COEF": "0",
        "GTPO_ALGO": "gtpo",
        "GTPO_REWARD_URL": "http://reward-server:8000/get_reward",
    }
    assert {k: env[k] for k in paper} == paper
    assert env["HF_TOKEN"] is None and env["WANDB_API_KEY"] is None
    assert trainer["command"] == ["train"]


def test_gpu_settings_follow_the_environment(compose_config):
    env = env_of(
        compose_config(
            BASE,
            ["gpu"],
            GTPO_MODEL="meta-llama/Llama-3.1-8B-Instruct",
            GTPO_N_SAMPLES="12",
            GTPO_RS_PORT="9100",
        )["services"]["trainer"]
    )
    assert env["GTPO_MODEL"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert env["GTPO_N_SAMPLES"] == "12"
    assert env["GTPO_REWARD_URL"] == "http://reward-server:9100/get_reward"


def test_hostnet_override_puts_every_service_and_build_on_the_host_network(compose_config):
    services = compose_config(HOSTNET, ["demo", "gpu"])["services"]
    for name, service in services.items():
        assert service["network_mode"] == "host", name
        assert service["build"]["network"] == "host", name
        assert not service.get("ports"), f"{name}: published ports do not apply to host mode"
    assert env_of(services["reward-server"])["GTPO_RS_HOST"] == "127.0.0.1"
    assert env_of(services["trainer"])["GTPO_REWARD_URL"] == "http://127.0.0.1:8000/get_reward"
    assert "--reward-url" in services["demo"]["command"]
    # The override only changes networking: the demo still waits for a healthy server.
    assert services["demo"]["depends_on"]["reward-server"]["condition"] == "service_healthy"
