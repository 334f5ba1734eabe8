"""GTPO inside unmodified OpenRLHF 0.11: the `gtpo-openrlhf` launcher and its Ray actor subclasses.

Trace of a run (flag → branch → tensor → metric):

- `__main__.py`   `gtpo-openrlhf` / `python -m gtpo.openrlhf`: strips the `--gtpo.*` flags, checks
                  the installed OpenRLHF (`compat.py`), rebinds OpenRLHF's Ray actor classes to the
                  subclasses below and runs `openrlhf.cli.train_ppo_ray` as `__main__`.
- `flags.py`      the `--gtpo.*` flags, the settings GTPO refuses and the entropy coefficient −γ.
- `actors.py`     Ray actor subclasses: the policy actor also returns each completion's mean
                  entropy from its experience-time forward; the trainer applies the advantage hook
                  after OpenRLHF's group_norm advantages; the actor trainer makes the entropy
                  penalty a per-completion mean (Eq. 7).
- `hook.py`       the advantage hook: A_i ← A_i · λ_{i,t} · δ_i (Eq. 5-7) on OpenRLHF experiences.
- `state.py`      H_ini (measured once, kept in checkpoints) and the entropy-collapse monitor.

Importing this package does not import OpenRLHF; only `actors.py` and `compat.py` do.
"""

import logging


def enable_logging(level: int = logging.INFO) -> None:
    """Show the adapter's log records where nothing else would (Ray workers, a bare CLI).

    Adds a stderr handler to the `gtpo` logger only when the root logger has none, so records
    are never printed twice and test log capture keeps working.
    """
    log = logging.getLogger("gtpo")
    log.setLevel(level)
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s %(name)s] %(message)s"))
        log.addHandler(handler)
