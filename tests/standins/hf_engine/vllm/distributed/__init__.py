"""Stand-in for `vllm.distributed`: the two classes OpenRLHF's weight sync uses (see utils.py)."""
