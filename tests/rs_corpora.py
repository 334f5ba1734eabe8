"""The reward server's labelled corpora (``tests/reward_server/*_corpus.py``), loaded by path, and
a scorer that scores whole completions the way the service does, on a real verification pool."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CORPORA = Path(__file__).with_name("reward_server")


def load_corpus(name: str) -> ModuleType:
    """``tests/reward_server/<name>.py`` as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, CORPORA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def score_completions(
    responses: list[str],
    labels: list[str],
    prompts: list[str] | None = None,
    response_format: str = "paper",
) -> list:
    """The service's scorer over a two-worker verification pool: one result per completion,
    each query being its prompt (when given) and its response."""
    from reward_server.checker.decide import symbolic_equivalent
    from reward_server.protocol import response_format as profile
    from reward_server.service.pool import VerifierPool
    from reward_server.service.scoring import Scorer
    from reward_server.service.settings import Settings
    from reward_server.service.verify import Verifier

    queries = (
        responses if prompts is None else [p + r for p, r in zip(prompts, responses, strict=True)]
    )

    async def run() -> list:
        pool = VerifierPool(symbolic_equivalent, size=2, timeout_s=5.0)
        await pool.start()
        try:
            scorer = Scorer(Settings(verify_workers=2), Verifier(pool))
            return await scorer.score_batch(queries, prompts, labels, profile(response_format))
        finally:
            await pool.close()

    return asyncio.run(run())
