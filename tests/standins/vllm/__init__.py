"""Stand-in for `vllm` on CPU test machines (the real one ships CUDA kernels).

OpenRLHF imports `vllm`, `vllm.SamplingParams`, `vllm.inputs.TokensPrompt` and
`vllm.utils.random_uuid` at module level (`trainer/ray/vllm_engine.py`,
`trainer/ppo_utils/samples_generator.py`). Only those names exist; nothing here generates text.
"""

__version__ = "0.0.0+cpu-standin"


class SamplingParams:
    """Holds keyword arguments; enough for code that builds sampling parameters."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class LLM:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("vllm stand-in: text generation needs the real vLLM on GPU")
