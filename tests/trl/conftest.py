"""tests/trl share a pytest process with tests/openrlhf, which puts a vLLM stand-in on sys.path
(OpenRLHF imports vLLM at module level and vLLM needs CUDA). TRL would take the stand-in for a
real vLLM and import modules it does not have. These tests train with use_vllm=False, so TRL is
told, before its trainer module is imported, that vLLM is absent, which it is.
"""

import pytest

import_utils = pytest.importorskip("trl.import_utils")
import_utils.is_vllm_available = lambda *args, **kwargs: False
