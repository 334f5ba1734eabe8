"""Start-up check that the installed OpenRLHF has every internal the adapter relies on.

The adapter subclasses OpenRLHF's classes and overrides some of their methods, so a release that
renames one would make GTPO silently inactive. Checked against OpenRLHF 0.11.2.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib import metadata

SUPPORTED = (0, 11)

# module -> dotted attributes that must exist in it.
REQUIRED: dict[str, tuple[str, ...]] = {
    "openrlhf.utils.config": ("hierarchize",),
    "openrlhf.trainer.ppo_trainer": (
        "PPOTrainer.__ray_actor_class__",
        "PPOTrainer._default_options",
        "BasePPOTrainer.train_step",
        "BasePPOTrainer.init_checkpoint_states",
        "BasePPOTrainer.save_logs_and_checkpoints",
        "BasePPOTrainer.save_best_checkpoint",
    ),
    "openrlhf.trainer.ppo_utils.experience_maker": (
        "RemoteExperienceMaker.make_experience",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        "RemoteExperienceMaker._dispatch_forward",
        "RemoteExperienceMaker._flatten_results",
        "RemoteExperienceMaker.split_rollout_samples",
    ),
    "openrlhf.trainer.ppo_utils.samples_generator": ("SamplesGenerator._generate_vllm",),
    "openrlhf.trainer.ray.vllm_engine": (
        "RolloutRayActor.__ray_actor_class__",
        "create_vllm_engines",
        "batch_vllm_engine_call",
    ),
    "openrlhf.utils.agent": (
        "SingleTurnAgentExecutor.execute",
        "SingleTurnAgentExecutor._fetch_rewards_via_http",
    ),
    "openrlhf.trainer.ppo_utils.experience": (
        "Experience.sequences",
        "Experience.action_mask",
        "Experience.advantages",
        "Experience.index",
    ),
    "openrlhf.trainer.ray.ppo_actor": (
        "PolicyModelActor.__ray_actor_class__",
        "PolicyModelActor._default_options",
        "PolicyModelActor.__ray_actor_class__.init_model_from_pretrained",
        "PolicyModelActor.__ray_actor_class__.forward",
        "ActorPPOTrainer.training_step",
        "merge_mm_train_inputs",
    ),
    "openrlhf.utils.loss_utils": ("get_loss_batch_info",),
    "openrlhf.models.ring_attn_utils": ("gather_and_pad_tensor",),
}


# The launcher rebinds names that train_ppo_ray looks up when it runs; its source must import
# them this way (it is not imported here: runpy must execute it fresh as __main__).
LAUNCH_MODULE = "openrlhf.cli.train_ppo_ray"
LAUNCH_IMPORTS = (
    "from openrlhf.utils.config import hierarchize",
    "from openrlhf.trainer.ray.ppo_actor import PolicyModelActor",
    "from openrlhf.trainer.ppo_trainer import PPOTrainer",
)


class OpenRLHFIncompatibleError(RuntimeError):
    """The installed OpenRLHF is not the one the adapter was written against."""


def _version() -> str:
    try:
        return metadata.version("openrlhf")
    except metadata.PackageNotFoundError as exc:
        raise OpenRLHFIncompatibleError(
            "OpenRLHF is not installed. Install it with `pip install 'gtpo[openrlhf]'` "
            "(openrlhf>=0.11,<0.12, on a CUDA machine)."
        ) from exc


def _has(obj: object, dotted: str) -> bool:
    # Dataclass fields with defaults (Experience.index, ...) are class attributes too.
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def check_openrlhf() -> str:
    """Raise OpenRLHFIncompatibleError unless OpenRLHF 0.11.x with every needed internal is here.

    Returns the installed version.
    """
    version = _version()
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if parts != SUPPORTED:
        raise OpenRLHFIncompatibleError(
            f"gtpo-openrlhf supports OpenRLHF 0.11.x, found {version}. Install "
            "`pip install 'openrlhf>=0.11,<0.12'` (or `pip install 'gtpo[openrlhf]'`)."
        )
    missing: list[str] = []
    for module_name, attributes in REQUIRED.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise OpenRLHFIncompatibleError(
                f"cannot import {module_name} from OpenRLHF {version}: {exc}. OpenRLHF needs its "
                "GPU dependencies (vllm, flash_attn, deepspeed) installed."
            ) from exc
        missing += [f"{module_name}.{a}" for a in attributes if not _has(module, a)]
    spec = importlib.util.find_spec(LAUNCH_MODULE)
    source = spec.loader.get_source(LAUNCH_MODULE) if spec and spec.loader else None
    if source is None:
        missing.append(LAUNCH_MODULE)
    else:
        missing += [f"{LAUNCH_MODULE}: `{line}`" for line in LAUNCH_IMPORTS if line not in source]
    if missing:
        raise OpenRLHFIncompatibleError(
            f"OpenRLHF {version} lacks internals the GTPO adapter overrides: {', '.join(missing)}. "
            "Install openrlhf==0.11.2, the version it was checked against."
        )
    return version
