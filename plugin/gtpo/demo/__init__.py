"""`gtpo demo`: the embedded default. A tiny Llama-style model learns a synthetic arithmetic task
with GTPO and with GRPO side by side on CPU, every reward fetched from the HTTP reward server.

Modules, in the order a run uses them: `task` (problems, reasoning styles, noisy
demonstrations), `tokenizer` (local BPE), `model` (the policy, sampling), `warmstart` (SFT),
`trainer` (the GTPO/GRPO loop), `evaluate` (pass@k,
maj@k), `report` (plots and summary), `run` (orchestration).
"""
