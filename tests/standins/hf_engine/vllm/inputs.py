"""Stand-in for `vllm.inputs` (see `vllm/__init__.py`)."""

TokensPrompt = dict
