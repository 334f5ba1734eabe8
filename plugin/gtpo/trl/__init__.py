"""GTPO for TRL users: `GTPOTrainer`, a subclass of TRL's `GRPOTrainer` (extra `gtpo[trl]`).

Trace of a run (setting → branch → tensor → metric):

- `trainer.py`  `GTPOTrainer(model, reward_funcs, args=GRPOConfig(...), gtpo_config=GTPOConfig())`:
                checks the TRL settings (`checks.py`), resolves H_ini at the first generation
                (checkpoint, config, or measured on the first training prompts), turns each
                batch's advantages into A_i·λ_{i,t}·δ_i with `gtpo.gtpo_terms`, adds Eq. 7's
                entropy penalty to TRL's loss and logs the gtpo/* metrics through TRL.
- `checks.py`   the TRL settings that contradict GTPO, each refused with its reason.
- `rewards.py`  `RewardServerReward`: a TRL reward function calling the reward server.

Importing this package imports TRL.
"""

from gtpo.trl.checks import trl_refusals
from gtpo.trl.rewards import RewardServerReward
from gtpo.trl.trainer import GTPOTrainer, entropy_term

__all__ = ["GTPOTrainer", "RewardServerReward", "entropy_term", "trl_refusals"]
