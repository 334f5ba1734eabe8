"""tests/trl share a pytest process with tests/openrlhf, which puts a vLLM stand-in on sys.path
(OpenRLHF imports vLLM at module level and vLLM needs CUDA). TRL would take the stand-in for a
real vLLM and import modules it does not have. These tests train with use_vllm=False, so TRL is
told, before its trainer module is imported, that vLLM is absent, which it is.

`task` is the tiny arithmetic task every TRL test trains on (the demo's): a tokenizer trained
locally and 48 prompts with their labels.
"""

import sys
from pathlib import Path

import pytest

import_utils = pytest.importorskip("trl.import_utils")
import_utils.is_vllm_available = lambda *args, **kwargs: False

# trl_harness.py imports as a top-level module (--import-mode=importlib adds no test folders).
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def task():
    from datasets import Dataset
    from transformers import PreTrainedTokenizerFast

    from gtpo.demo.task import corpus, make_split
    from gtpo.demo.tokenizer import EOS, PAD, build_tokenizer

    split = make_split(48, 0)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(corpus(split.train)), pad_token=PAD, eos_token=EOS
    )
    rows = [{"prompt": p.prompt, "label": str(p.answer)} for p in split.train]
    return tokenizer, Dataset.from_list(rows)
