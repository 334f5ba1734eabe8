"""Stand-in for vLLM's `PyNcclCommunicator`: the gloo broadcast of tests/standins/
vllm_cpu_transport.py, the one the real engine's runs use too."""

from vllm_cpu_transport import GlooCommunicator as PyNcclCommunicator

__all__ = ["PyNcclCommunicator"]
