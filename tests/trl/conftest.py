"""tests/trl share a pytest process with tests/openrlhf, which imports vLLM (its CPU build, or the
stand-in engine where it is missing). These tests train with use_vllm=False, so TRL is told,
before its trainer module is imported, that vLLM is absent: TRL would otherwise import vLLM's
modules for nothing (the stand-in has none of them). tests/trl/test_trl_vllm.py runs TRL with
the real engine in a process of its own.

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
