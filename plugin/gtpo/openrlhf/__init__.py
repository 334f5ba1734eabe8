"""GTPO inside unmodified OpenRLHF: the `gtpo-openrlhf` launcher and its Ray actor subclasses.

The OpenRLHF release it supports, and everything the adapter knows about that release, is in
`compat.py`; `seam.py` is the one place that touches OpenRLHF's internals.

Trace of a run (flag → branch → tensor → metric):

- `__main__.py`   `gtpo-openrlhf` / `python -m gtpo.openrlhf`: takes the `--gtpo.*` flags out,
                  checks the installed OpenRLHF (`compat.py`), has train_ppo_ray build GTPO's Ray
                  actors where it builds its own, runs `openrlhf.cli.train_ppo_ray` as `__main__`.
- `flags.py`      the `--gtpo.*` flags on OpenRLHF's command line (GTPOConfig's) and what GTPO
                  sets in OpenRLHF's settings (−γ as the entropy coefficient, ...).
- `checks.py`     every rule a command line must pass, one table, for a run and a dry run alike.
- `plan.py`       what `--dry-run` prints; `memory.py` the memory per GPU it estimates.
- `run_args.py`   the GTPOConfig every actor reads from OpenRLHF's args. The launcher's modules
                  (`__main__`, `flags`, `checks`, `plan`, `memory`, `dry_imports`) are never
                  imported by an actor's (tests/openrlhf/test_orl_layout.py).
- `compat.py`     every fact about the supported OpenRLHF release: version, the internals used,
                  the settings read, the tensor layout; and the start-up check.
- `seam.py`       OpenRLHF's classes as GTPO extends them, the names GTPO has OpenRLHF build.
- `controller.py` the single controller: H_ini, the gtpo/* metrics, the rollouts' generator.
- `experience.py` the experience maker: keeps ⟨H⟩_i, weights OpenRLHF's group advantages.
- `step.py`       one GTPO step: ⟨H⟩_i, A_i ← λ_{i,t} · δ_i · A_i (or λ_{i,t} · δ_i · (A_i −
                  γ⟨H⟩_i) in the advantage form), and the entropy weights of Eq. 7.
- `policy.py`     the policy ranks: the experience forward with ⟨H⟩_i, the training step with
                  Eq. 7's per-completion entropy (`fused.py`), the weight sync (`lora.py`).
- `rollout_actor.py` the vLLM rollout actors' retrying reward call (`rewards.py`).
- `async_training.py` the same under `--train.async_enable`, with policy versions.
- `state.py`      (gtpo.state) H_ini kept in checkpoints and the entropy-collapse monitor.

Importing this package does not import OpenRLHF; `seam.py` does (and `compat.py` when it
checks the install), and so do the modules that extend its classes.
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
