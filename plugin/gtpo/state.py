"""What GTPO keeps across training steps: H_ini and the entropy-collapse monitor.

Framework-free: the OpenRLHF adapter keeps H_ini in DeepSpeed's checkpoint client states, the
TRL trainer in TrainerState; both read and write it through these functions.

H_ini (Eq. 6) is the model's mean completion entropy *before* training. It is measured once,
before the first update, on the first --gtpo.h_ini_prompts training prompts (or given with
--gtpo.h_ini), and stored in the checkpoint's client states so
that a resumed run filters with the H_ini of the original model, not of the resumed one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

from gtpo import LN2

logger = logging.getLogger(__name__)

CLIENT_STATE_KEY = "gtpo_h_ini"
METRIC_PREFIX = "gtpo/"


def save_h_ini(client_states: MutableMapping[str, Any], h_ini: float | None) -> None:
    """Put H_ini into the client states OpenRLHF passes to DeepSpeed's save_checkpoint."""
    if h_ini is not None:
        client_states[CLIENT_STATE_KEY] = float(h_ini)


def restore_h_ini(checkpoint_states: Mapping[str, Any] | None, flag: float | None) -> float | None:
    """H_ini for a (possibly resumed) run: --gtpo.h_ini wins, else the checkpoint's, else None.

    None means "measure it now" (before the first update of this run).
    """
    saved = (checkpoint_states or {}).get(CLIENT_STATE_KEY)
    if flag is not None:
        if saved is not None and abs(float(saved) - flag) > 1e-6:
            logger.warning(
                "--gtpo.h_ini %.4f overrides the H_ini %.4f stored in the checkpoint", flag, saved
            )
        return float(flag)
    if saved is not None:
        logger.info("GTPO: H_ini = %.4f nats restored from the checkpoint", saved)
        return float(saved)
    if checkpoint_states and checkpoint_states.get("global_step", 0) > 0:
        logger.warning(
            "resuming from a checkpoint without %s: H_ini will be measured now, on the partly "
            "trained model. Pass --gtpo.h_ini with the original value.",
            CLIENT_STATE_KEY,
        )
    return None


def log_measured_h_ini(h_ini: float, prompts: int, completions: int, seconds: float,
                       threshold: float) -> None:  # fmt: skip
    """The one log line of a measured H_ini, with what Eq. 6 then does at the cut `threshold`."""
    logger.info(
        "GTPO: H_ini = %.4f nats measured on %d prompts × %d completions in %.1f s (the cut of "
        "Eq. 6: %.4f): %s",
        h_ini, prompts, completions, seconds, threshold,
        "below it, Eq. 6 filters completions with ⟨H⟩ above it"
        if h_ini < threshold
        else "at or above it, Eq. 6 keeps every completion (with --gtpo.entropy_filter auto)",
    )  # fmt: skip


def prefixed(metrics: Mapping[str, float], h_ini: float | None) -> dict[str, float]:
    """GTPO metrics under their logged names gtpo/<name>, plus gtpo/h_ini."""
    out = {f"{METRIC_PREFIX}{k}": float(v) for k, v in metrics.items()}
    if h_ini is not None:
        out[f"{METRIC_PREFIX}h_ini"] = float(h_ini)
    return out


class EntropyMonitor:
    """Warns when the mean completion entropy stays above ln 2, the paper's collapse signal.

    Sec. 4.2 / Fig. 4: in collapsing runs ⟨H⟩ rises past ln 2 and stays there while the format
    reward degrades; KL reacts much later. One warning when a streak reaches `patience` steps,
    then one every `patience` steps while it lasts.
    """

    def __init__(self, patience: int = 5) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1 step, got {patience}")
        self.patience = patience
        self.streak = 0

    def update(self, entropy_mean: float, h_ini: float | None, step: int) -> bool:
        """Record one step's mean entropy; returns True when it logged a warning."""
        if entropy_mean <= LN2:
            self.streak = 0
            return False
        self.streak += 1
        if self.streak % self.patience != 0:
            return False
        started_high = h_ini is not None and h_ini >= LN2
        logger.warning(
            "step %d: mean completion entropy %.4f has stayed above ln 2 = %.4f for %d steps "
            "(H_ini = %s). %s",
            step,
            entropy_mean,
            LN2,
            self.streak,
            "unknown" if h_ini is None else f"{h_ini:.4f}",
            "The model started above ln 2 as well, so Eq. 6 filters nothing; watch the format "
            "reward."
            if started_high
            else "This is the paper's policy-collapse signal (Sec. 4.2): check the format "
            "reward, and consider a larger --gtpo.gamma or --gtpo.entropy_filter on.",
        )
        return True
