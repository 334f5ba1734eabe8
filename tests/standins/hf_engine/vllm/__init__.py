"""Stand-in for `vllm` on CPU test machines (the real one ships CUDA kernels).

OpenRLHF imports `vllm`, `vllm.SamplingParams`, `vllm.inputs.TokensPrompt` and
`vllm.utils.random_uuid` at module level (`trainer/ray/vllm_engine.py`,
`trainer/ppo_utils/samples_generator.py`). For the end-to-end `fit()` test
(tests/openrlhf/test_orl_fit.py) OpenRLHF's real `RolloutRayActor` also builds an engine with
`vllm.AsyncEngineArgs` / `vllm.AsyncLLMEngine`: `engine.py` generates with transformers instead.
The offline `vllm.LLM` is not used by OpenRLHF's PPO path and raises.
"""

# The vLLM release OpenRLHF 0.11.2 pins, so that OpenRLHF's version gates (streaming engine
# > 0.8.5, VLLM_ALLOW_INSECURE_SERIALIZATION from 0.9) take the branch a real install takes.
__version__ = "0.29.0+cpu.standin"


class SamplingParams:
    """Holds keyword arguments; enough for code that builds sampling parameters."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class LLM:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("vllm stand-in: the offline LLM class needs the real vLLM on GPU")


def __getattr__(name):
    # Imported lazily: the engine imports transformers, which unit tests that only need the
    # names above should not pay for.
    if name in ("AsyncEngineArgs", "AsyncLLMEngine"):
        from vllm import engine

        return getattr(engine, name)
    raise AttributeError(name)
