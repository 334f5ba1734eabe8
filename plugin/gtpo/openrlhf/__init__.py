"""GTPO inside unmodified OpenRLHF: the `gtpo-openrlhf` launcher and its Ray actor subclasses.

The OpenRLHF release it supports, and everything the adapter knows about that release, is in
`compat.py`.

Trace of a run (flag → branch → tensor → metric):

- `__main__.py`   `gtpo-openrlhf` / `python -m gtpo.openrlhf`: strips the `--gtpo.*` flags, checks
                  the installed OpenRLHF (`compat.py`), rebinds OpenRLHF's Ray actor classes to the
                  subclasses below and runs `openrlhf.cli.train_ppo_ray` as `__main__`.
- `compat.py`     every fact about the supported OpenRLHF release: version, the internals
                  overridden, the settings read, the tensor layout; and the start-up check.
- `flags.py`      the `--gtpo.*` flags on OpenRLHF's command line (GTPOConfig's), the OpenRLHF
                  settings GTPO refuses and the entropy coefficient (−γ in the penalty form).
- `actors.py`     Ray actor subclasses: the policy actor also returns each completion's mean
                  entropy from its experience-time forward; the experience maker weights
                  OpenRLHF's group advantages; the actor trainer makes the entropy penalty a
                  per-completion mean (Eq. 7).
- `advantages.py` A_i ← λ_{i,t} · δ_i · A_i, or λ_{i,t} · δ_i · (A_i − γ⟨H⟩_i) in the advantage
                  form (Eq. 5-7), on OpenRLHF experiences, from `gtpo.gtpo_terms`.
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
